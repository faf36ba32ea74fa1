"""What timing tests compare with (issue 20): a reference measured in the same run, here the test
server's own time per request (tests/targets/http_delay_server.py answers them on GET /stats), and
whether the machine could hold it: the kernel's CPU pressure over the same run. A test asserts against
the reference; only when the machine demonstrably could not hold it does it skip, saying what it
measured."""

from __future__ import annotations

import json
import math
import time
import urllib.request
from typing import Optional
from urllib.parse import urljoin

import pytest

# Loopback, the server thread's wake-up on the request and the generator's on the answer: what the
# generator may add to the server's own time per request on a quiet machine.
TRANSPORT_S = 0.001

# Share of a run during which some task waited for a CPU (/proc/pressure/cpu, "some") from which the
# machine is too busy to hold a millisecond. A quiet 2-CPU machine running the test alone reads up to
# about a quarter (the generator's and the server's own threads), 8 busy loops on it read 95-100 %.
BUSY_PRESSURE = 0.5


def quantile(values: list, q: float) -> float:
    """The value of rank ceil(q * n), HdrHistogram's convention (the generator's percentiles)."""
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]


def server_times(url: str, expected: int = 0, wait_s: float = 2.0) -> list:
    """The delay server's own times since the last call (and forgets them). It notes a request's time
    after writing the answer, so the last ones may come a moment after the generator read them: waits
    up to `wait_s` for `expected` of them."""
    times: list = []
    deadline = time.monotonic() + wait_s
    while True:
        with urllib.request.urlopen(urljoin(url, "/stats"), timeout=10) as answer:
            times += json.load(answer)["served_s"]
        if len(times) >= expected or time.monotonic() > deadline:
            return times
        time.sleep(0.05)


def _cpu_pressure_total_s() -> Optional[float]:
    try:
        with open("/proc/pressure/cpu") as f:
            for line in f:
                if line.startswith("some "):
                    return int(line.split("total=")[1]) / 1e6
    except (OSError, IndexError, ValueError):
        pass
    return None


class Pressure:
    """CPU pressure over an interval: started before the run, read after it."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.total = _cpu_pressure_total_s()

    def end(self) -> "Pressure":
        """Ends the interval now, so a later ``share()`` reads this run's pressure, not the tests' after it."""
        self.ended = self.share()
        return self

    def share(self) -> Optional[float]:
        """Share of the interval during which some task waited for a CPU (None: the kernel does not say)."""
        if hasattr(self, "ended"):
            return self.ended
        now = _cpu_pressure_total_s()
        if now is None or self.total is None:
            return None
        return (now - self.total) / (time.monotonic() - self.start)


def busy(pressure: Optional[float]) -> str:
    """Why the machine could not hold a millisecond during a run, with the numbers ("" when it could,
    or the kernel does not say)."""
    if pressure is None or pressure < BUSY_PRESSURE:
        return ""
    return f"other tasks waited for a CPU during {pressure * 100:.0f} % of the run"


def within_server_time(
    what: str, generator_s: float, server_s: float, allowed_s: float, pressure: Optional[float], note: str = ""
) -> str:
    """A generator's figure against the server's own for the same requests: never below it (each
    request's time at the generator contains its time at the server), and at most `allowed_s` above.
    Past that, on a machine that was busy during the run, skips saying what it measured; otherwise the
    assertion fails. Returns the measurement in words."""
    gap = generator_s - server_s
    measured = (
        f"{what}: generator {generator_s * 1e3:.3f} ms, server's own {server_s * 1e3:.3f} ms, "
        f"gap {gap * 1e3:.3f} ms (allowed {allowed_s * 1e3:.3f} ms), CPU pressure "
        + ("unknown" if pressure is None else f"{pressure * 100:.1f} %")
    )
    assert generator_s >= server_s, f"shorter than the server's own time: {measured}"
    if gap > allowed_s and busy(pressure):
        pytest.skip(f"the machine cannot hold a millisecond ({busy(pressure)}){note}: {measured}")
    assert gap <= allowed_s, measured
    return measured


def assert_unless_busy(ok: bool, pressure: Optional["Pressure"], measured: str) -> None:
    """Asserts ``ok``; when it does not hold on a machine busy during ``pressure``'s interval (the
    kernel cannot give the target the CPU shares the check assumes), skips saying what was measured."""
    why = busy(pressure.share()) if pressure is not None else ""
    if not ok and why:
        pytest.skip(f"the machine was too busy for this check ({why}): {measured}")
    assert ok, measured
