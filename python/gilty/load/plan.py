"""Turning the command line into the native generator's plan: URLs (optionally weighted), method,
headers, body, arrivals and limits, and the rates of a ramp."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Optional

from gilty._errors import UsageError

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_IN_FLIGHT = 1000
# Requests started per second, at most: far above what one generator sends (docs/benchmarks.md), and
# low enough that a schedule is never so dense its arrivals cannot be counted in time.
MAX_RATE = 1e6
MAX_RAMP_STEPS = 1000
_NUMBERISH = re.compile(r"[-+.\d]|(nan|inf)", re.IGNORECASE)


@dataclass
class GeneratorOptions:
    """gilty's open-loop generator: the requests it sends and how (the same for every step)."""

    urls: list  # [(url, weight)]
    method: str = "GET"
    headers: list = field(default_factory=list)  # [(name, value)]
    body: bytes = b""
    arrivals: str = "constant"
    seed: int = 1
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_s: float = DEFAULT_TIMEOUT_S
    connections: int = 64
    threads: int = 1


def parse_url(text: str) -> tuple:
    """``URL`` or ``URL@WEIGHT`` → (url, weight).

    An ``@`` after the host whose tail has no ``/``, ``?`` or ``#`` is a weight, and must be a finite
    number greater than 0: ``URL@abc`` and ``URL@-1`` are errors, not part of the path (an ``@`` in
    a path is written ``%40``).
    """
    if not text.startswith("http://"):
        raise UsageError(f"{text}: only http:// URLs are supported")
    host_end = text.find("/", len("http://"))
    url, sep, weight = text.rpartition("@")
    if not sep or any(c in weight for c in "/?#"):
        return text, 1.0
    if (host_end < 0 or len(url) < host_end) and not _NUMBERISH.match(weight):
        return text, 1.0  # http://user@host: the @ of the host part, not a weight
    try:
        value = float(weight)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise UsageError(
            f"{text}: the weight after @ must be a finite number greater than 0, not {weight!r} (write an @ in a path as %40)"
        )
    return url, value


def parse_header(text: str) -> tuple:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise UsageError(f"{text!r} is not a header (NAME: VALUE)")
    return name.strip(), value.strip()


def parse_ramp(text: str) -> list:
    """``FROM:TO:STEP`` → the rates FROM, FROM+STEP, …, up to TO."""
    try:
        start, stop, step = (float(x) for x in text.split(":"))
    except ValueError:
        raise UsageError(f"--ramp {text!r}: expected FROM:TO:STEP, e.g. 50:1000:50") from None
    if not (0 < start <= stop and step > 0):  # false for NaN too
        raise UsageError(f"--ramp {text!r}: need 0 < FROM <= TO and STEP > 0")
    if stop > MAX_RATE:
        raise UsageError(f"--ramp {text!r}: at most {MAX_RATE:g} requests per second")
    # Counted before any list is built: 1:100000000:1 must not build a hundred million rates first.
    steps = (stop - start) / step  # inf for a subnormal STEP
    if not steps < MAX_RAMP_STEPS:
        raise UsageError(f"--ramp {text!r} has more than {MAX_RAMP_STEPS} steps")
    count = math.floor(steps + 1e-9) + 1
    return [round(start + i * step, 6) for i in range(count)]


def parse_slo(text: Optional[str]) -> Optional[tuple]:
    """``p99=50ms`` → ("p99", 0.05). Percentiles: p50, p90, p99, p99.9; units ms or s."""
    if text is None:
        return None
    key, sep, value = text.partition("=")
    key = key.strip().lower().replace("p99.9", "p99_9")
    if not sep or key not in ("p50", "p90", "p99", "p99_9"):
        raise UsageError(f"--slo {text!r}: expected e.g. p99=50ms (p50, p90, p99 or p99.9)")
    value = value.strip().lower()
    try:
        if value.endswith("ms"):
            seconds = float(value[:-2]) / 1e3
        elif value.endswith("s"):
            seconds = float(value[:-1])
        else:
            seconds = float(value) / 1e3
    except ValueError:
        raise UsageError(f"--slo {text!r}: {value!r} is not a duration like 50ms or 0.05s") from None
    if seconds <= 0:
        raise UsageError(f"--slo {text!r}: the limit must be greater than 0")
    return key, seconds


def native_plan(options: GeneratorOptions, rate: float, duration_s: float) -> dict:
    return {
        "requests": [
            {"method": options.method, "url": url, "headers": list(options.headers), "body": options.body, "weight": w}
            for url, w in options.urls
        ],
        "rate": float(rate),
        "duration_s": float(duration_s),
        "arrivals": options.arrivals,
        "seed": int(options.seed),
        "max_in_flight": int(options.max_in_flight),
        "timeout_s": float(options.timeout_s),
        "connections": int(options.connections),
        "threads": int(options.threads),
    }
