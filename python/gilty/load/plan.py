"""Turning the command line into the native generator's plan: URLs (optionally weighted), method,
headers, body, arrivals and limits, and the rates of a ramp."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gilty._errors import UsageError

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_IN_FLIGHT = 1000


@dataclass
class LoadOptions:
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
    """``URL`` or ``URL@WEIGHT`` → (url, weight)."""
    url, sep, weight = text.rpartition("@")
    if sep and url.startswith("http") and weight.replace(".", "", 1).isdigit():
        value = float(weight)
        if value <= 0:
            raise UsageError(f"{text}: a weight must be greater than 0")
        return url, value
    if not text.startswith("http://"):
        raise UsageError(f"{text}: only http:// URLs are supported")
    return text, 1.0


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
    if not (0 < start <= stop and step > 0):
        raise UsageError(f"--ramp {text!r}: need 0 < FROM <= TO and STEP > 0")
    rates, r = [], start
    while r <= stop + 1e-9:
        rates.append(round(r, 6))
        r += step
    if len(rates) > 1000:
        raise UsageError(f"--ramp {text!r} has {len(rates)} steps; at most 1000")
    return rates


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


def native_plan(options: LoadOptions, rate: float, duration_s: float) -> dict:
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
