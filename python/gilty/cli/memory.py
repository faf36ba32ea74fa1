"""Shared and private memory of a prefork master and its workers over time, copy-on-write by cause.

  gilty memory --pid MASTER --duration 30
  gilty memory --pid MASTER --duration 60 --format json -o memory.json

Measures the master and every descendant (workers that start or are replaced during the run
too): RSS, PSS, USS, shared/private clean/dirty and minor faults every --interval; which pages
shared with the master each worker copied, during garbage collection or outside it; each
process's GC configuration. Ends at --duration, Ctrl-C, or when the master exits.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Optional

from gilty import report
from gilty._errors import EXIT_OK, EXIT_PARTIAL, UsageError
from gilty.cli.options import add_format_argument, bounded_float, check_output, output_format, pid_number, seconds
from gilty.memory.session import MemorySession
from gilty.sampling import launch

DEFAULT_INTERVAL_S = 1.0
DEFAULT_GC_POLL_MS = 1.0
# Each collect() waits this long with the GIL released; Ctrl-C is seen between calls.
CHUNK_S = 0.25
MIN_INTERVAL_S = 0.05


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = "gilty memory --pid MASTER [--duration S] [--interval S] [--gc-poll MS] [-o FILE] [--format {text,json}]"
    parser.add_argument("--pid", type=pid_number, required=True, help="the master (parent) process of the tree")
    parser.add_argument(
        "--duration", type=seconds, metavar="S", help="stop after S seconds (default: until Ctrl-C or the master exits)"
    )
    parser.add_argument(
        "--interval",
        type=seconds,
        default=DEFAULT_INTERVAL_S,
        metavar="S",
        help="seconds between measurements of every process (default: %(default)g)",
    )
    parser.add_argument(
        "--gc-poll",
        type=bounded_float(0.0, 60_000.0),
        default=DEFAULT_GC_POLL_MS,
        metavar="MS",
        help="milliseconds between reads of each process's GC flag (default: %(default)g)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    add_format_argument(parser)


def measure_until_stopped(
    session: MemorySession,
    monitor: Any,
    duration_s: Optional[float],
    stop: Any,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Collect batches into ``session`` until the duration, the master's exit, or ``stop``; then stop
    the monitor and take its last measurements."""
    started = clock()
    stopped_by = "interrupt"
    try:
        while not stop.requested:
            chunk = CHUNK_S
            if duration_s is not None:
                remaining = duration_s - (clock() - started)
                if remaining <= 0.01:
                    stopped_by = "duration"
                    break
                chunk = min(chunk, remaining)
            batch = monitor.collect(chunk)
            session.add_batch(batch)
            if batch.get("finished"):
                stopped_by = "master_exit" if session.master_exited is not None else "finished"
                break
    except KeyboardInterrupt:  # a Ctrl-C that arrived before our handler was installed
        stopped_by = "interrupt"
    stats = monitor.stop()
    session.add_batch(monitor.collect(0.0))
    session.finish(stats, clock() - started, stopped_by)


def finish(session: MemorySession) -> int:
    """Exit status. The master exiting before the requested --duration makes the result partial
    (exit 8); without --duration its exit is how the run ends (as for `gilty record --pid`)."""
    requested = session.requested_duration_s
    if session.stopped_by != "master_exit" or requested is None:
        return EXIT_OK
    t = session.master_exited if session.master_exited is not None else session.duration_s
    session.mark_partial(f"master pid {session.master_pid} exited after {t:.1f} s of the requested {requested:g} s")
    return EXIT_PARTIAL


def run(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    check_output(args.output)
    interval = max(args.interval, MIN_INTERVAL_S)
    gc_poll_s = args.gc_poll / 1e3
    if not 0.1 <= args.gc_poll <= 1000:
        raise UsageError("--gc-poll must be between 0.1 and 1000 ms")
    native = launch.native_module()
    with launch.StopSignals() as stop:
        monitor = native.MemoryMonitor(args.pid, interval_s=interval, gc_poll_s=gc_poll_s)
        session = MemorySession(args.pid, interval, gc_poll_s, requested_duration_s=args.duration)
        until = f"for {args.duration:g} s" if args.duration else "until Ctrl-C or the master exits"
        print(
            f"gilty: measuring pid {args.pid} and its children every {interval:g} s (GC flag every {args.gc_poll:g} ms) {until}",
            file=sys.stderr,
        )
        measure_until_stopped(session, monitor, args.duration, stop)
    status = finish(session)
    if session.partial:
        print(f"gilty: {session.partial_reason}; the result is PARTIAL", file=sys.stderr)
    report.write(session, fmt, args.output)
    return status
