"""The in-process monitor: per-thread GIL hold / wait / gc / idle shares of *this* process.

    import gilty.observe.monitor
    gilty.observe.monitor.start(interval=0.001)
    ...
    gilty.gil_stats()        # or gilty.observe.monitor.gil_stats()

A native thread (no Python thread state, never takes the GIL) reads this interpreter's GIL and
thread states from memory the way ``gilty record`` reads another process, so the measurement does
not create the contention it reports. GC pauses are exact, from ``gc.callbacks``.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Optional

from gilty.observe.monitor.gc_pauses import GcPauses
from gilty.sampling.session import STATE_NAMES

DEFAULT_INTERVAL_S = 0.001
WINDOWS_S = (1, 10, 60)

_lock = threading.Lock()
_monitor: Any = None
_gc: Optional[GcPauses] = None
_pid: Optional[int] = None


def start(interval: float = DEFAULT_INTERVAL_S) -> None:
    """Start monitoring this process (idempotent; a second call with another interval restarts it).

    Raises ``gilty.GiltyError`` (one line) when this interpreter cannot be read, e.g. an
    unsupported version or ``/proc/self/mem`` not readable.
    """
    global _monitor, _gc, _pid
    from gilty import _native

    with _lock:
        if _monitor is not None and _pid == os.getpid() and _monitor.interval_s == interval and _monitor.running:
            return
        _stop_locked()
        _monitor = _native.GilMonitor(float(interval))
        _gc = GcPauses()
        _pid = os.getpid()


def stop() -> None:
    """Stop the monitor thread and the GC callback; the last figures stay readable."""
    with _lock:
        _stop_locked()


def _stop_locked() -> None:
    global _gc
    if _monitor is not None:
        _monitor.stop()
    if _gc is not None:
        _gc.remove()
        _gc = None


def running() -> bool:
    # After a fork only the forking thread survives: the child's monitor object has no thread.
    return _monitor is not None and _pid == os.getpid() and _monitor.running


def add_gc_listener(listener) -> None:
    """Call ``listener(generation, pause_s)`` after every collection while the monitor runs."""
    with _lock:
        if _gc is None:
            raise RuntimeError("start the monitor first (gilty.observe.monitor.start())")
        _gc.add_listener(listener)


def _shares(counts: list) -> dict:
    samples = sum(counts)
    shares = {name: (n / samples if samples else 0.0) for name, n in zip(STATE_NAMES, counts)}
    return {"samples": samples, **shares}


def gil_stats(windows: tuple = WINDOWS_S) -> dict:
    """Per-thread state shares over sliding windows and since start, plus exact GC pauses.

    {"pid", "running", "interval_s", "elapsed_s", "passes", "monitor_cpu_s", "failure",
     "threads": [{"tid", "name", "windows": {"1s": {"samples", "holding_gil", "waiting_gil", "gc",
     "native", "idle", "unknown"}, ..., "total": {...}}, "seconds": {state: seconds}}],
     "gc": {"collections", "pause_s", "by_generation": {...}}}. Empty figures before ``start()``.
    """
    with _lock:
        monitor, gc_pauses = _monitor, _gc
    if monitor is None:
        return {
            "pid": os.getpid(),
            "running": False,
            "interval_s": None,
            "elapsed_s": 0.0,
            "passes": 0,
            "monitor_cpu_s": 0.0,
            "failure": None,
            "threads": [],
            "gc": GcPauses.empty_snapshot(),
        }
    raw = monitor.stats(list(windows))
    threads = []
    for t in raw["threads"]:
        shares = {f"{w}s": _shares(counts) for w, counts in sorted(t["windows"].items())}
        shares["total"] = _shares(t["total"])
        threads.append(
            {
                "tid": t["tid"],
                "name": t["name"],
                "windows": shares,
                "seconds": dict(zip(STATE_NAMES, t["total_s"])),
            }
        )
    return {
        "pid": os.getpid(),
        "running": running(),
        "interval_s": monitor.interval_s,
        "elapsed_s": raw["elapsed_s"],
        "passes": raw["passes"],
        "monitor_cpu_s": raw["monitor_cpu_s"],
        "failure": raw["failure"],
        "threads": threads,
        "gc": gc_pauses.snapshot() if gc_pauses is not None else GcPauses.empty_snapshot(),
    }
