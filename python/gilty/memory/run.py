"""One `gilty memory` run: the master and every descendant measured every interval until the
duration ends, the user stops or the master exits (sampling.capture's loop)."""

from __future__ import annotations

import sys
import time
from typing import Any

from gilty._errors import EXIT_OK, EXIT_PARTIAL
from gilty.memory.session import MemorySession
from gilty.options import MemoryOptions
from gilty.sampling import capture, launch

# `gilty memory`'s defaults, the command line's and the mcp tool's (assist/tools.py).
DEFAULT_INTERVAL_S = 1.0
DEFAULT_GC_POLL_MS = 1.0
MIN_INTERVAL_S = 0.05

# The native monitor keeps its own schedule; the loop's end test keeps a 10 ms margin (capture.ends_now).
END_PERIOD_S = 0.02


def run(options: MemoryOptions, stop: Any) -> MemorySession:
    native = launch.native_module()
    # The fault sampler first: a host that refuses perf events ends the run before anything started.
    faults = _start_faults(native, options)
    monitor = native.MemoryMonitor(options.pid, interval_s=options.interval_s, gc_poll_s=options.gc_poll_s)
    session = MemorySession(options.pid, options.interval_s, options.gc_poll_s, requested_duration_s=options.duration_s)
    if faults is not None:
        print(f"gilty: sampling the workers' page faults (every {options.fault_period})", file=sys.stderr)
    until = f"for {options.duration_s:g} s" if options.duration_s else "until Ctrl-C or the master exits"
    print(
        f"gilty: measuring pid {options.pid} and its children every {options.interval_s:g} s "
        f"(GC flag every {options.gc_poll_ms:g} ms) {until}",
        file=sys.stderr,
    )
    try:
        measure(session, monitor, options.duration_s, stop)
    finally:
        if faults is not None:
            session.faults = faults.stop()
    _fault_errors(session)
    _mark_partial(session)
    if session.partial:
        print(f"gilty: {session.partial_reason}; the result is PARTIAL", file=sys.stderr)
    return session


def _start_faults(native: Any, options: MemoryOptions) -> Any:
    """The page-fault sampler of every worker (None without --faults). Its events are open when this
    returns, so a worker's faults from here on are seen."""
    if not options.faults:
        return None
    return native.FaultWatch(options.pid, period=options.fault_period)


def _fault_errors(session: MemorySession) -> None:
    """A fault sampler that could open no event says why in one line (perf not permitted, say)."""
    raw = session.faults
    if raw is None or not raw["errors"]:
        return
    reasons = sorted({e for _, e in raw["errors"]})
    session.notes.append("--faults: " + "; ".join(f"{reason}" for reason in reasons))
    if raw["samples"] == 0:
        print(f"gilty: --faults sampled nothing: {reasons[0]}", file=sys.stderr)


def measure(session: MemorySession, monitor: Any, duration_s, stop: Any) -> None:
    """Collect batches into ``session`` until the duration, the master's exit, or ``stop``; then stop
    the monitor and take its last measurements."""
    started = time.monotonic()

    def step(seconds: float) -> bool:
        batch = monitor.collect(seconds)
        session.add_batch(batch)
        return bool(batch.get("finished"))

    ended = capture.collect_until(step, END_PERIOD_S, duration_s, stop)
    stopped_by = ended.stopped_by
    if stopped_by == "target_exit":
        stopped_by = "master_exit" if session.master_exited is not None else "finished"
    stats = monitor.stop()
    session.add_batch(monitor.collect(0.0))
    session.finish(stats, time.monotonic() - started, stopped_by)


def _mark_partial(session: MemorySession) -> None:
    """The master exiting before the requested --duration makes the result partial; without
    --duration its exit is how the run ends (as for `gilty record --pid`)."""
    requested = session.requested_duration_s
    if session.stopped_by != "master_exit" or requested is None:
        return
    t = session.master_exited if session.master_exited is not None else session.duration_s
    session.mark_partial(f"master pid {session.master_pid} exited after {t:.1f} s of the requested {requested:g} s")


def exit_status(session: MemorySession) -> int:
    """Exit 8 for a partial result (the master exited early), else 0."""
    return EXIT_PARTIAL if session.partial else EXIT_OK
