"""Which hot instructions the adaptive interpreter specialized, which miss, and what that costs.

  gilty specialization --pid PID --duration 5
  gilty specialization --pid MASTER --subprocesses --format json -o spec.json

Samples where each running thread's innermost frame stands (time-weighted, down to the
instruction) and re-reads the hot code objects' adaptive bytecode (co_code_adaptive) from
outside every --read-interval, without writing to the target. Reports per site its form
(specialized, warming, backoff, cold), what its counter means, an estimate of the executions
that miss or run the generic path, and the costliest sites with their likely cause.
CPython 3.11, 3.12 and 3.13. On 3.10, the opcache that preceded specialization: which hot code
objects have one and whether each LOAD_GLOBAL / LOAD_ATTR / LOAD_METHOD entry is in use.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from gilty import report
from gilty._errors import EXIT_OK, EXIT_PARTIAL, EXIT_UNSUPPORTED, CommandError, exit_code_for_kind
from gilty.cli.options import (
    add_format_argument,
    bounded_float,
    check_output,
    output_format,
    pid_number,
    positive_int,
    sampling_rate,
    seconds,
)
from gilty.sampling import launch
from gilty.specialization.analysis import analyse
from gilty.specialization.result import OpcacheResult, SpecializationResult
from gilty.specialization.session import ProcessWatch, SpecializationSession
from gilty.specialization.sources import read_sources

DEFAULT_DURATION_S = 5.0
DEFAULT_RATE_HZ = 500.0
DEFAULT_READ_INTERVAL_MS = 5.0
MAX_CODES = 200


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "gilty specialization --pid PID [--duration S] [--top N] [--format {text,json,html}] [-o FILE] [--subprocesses]"
    )
    parser.add_argument("--pid", type=pid_number, required=True, help="the process to read")
    parser.add_argument(
        "--duration", type=seconds, default=DEFAULT_DURATION_S, metavar="S", help="seconds to sample (default: %(default)g)"
    )
    parser.add_argument(
        "--top", type=positive_int, default=10, metavar="N", help="sites and functions listed (default: %(default)d)"
    )
    parser.add_argument(
        "--rate",
        type=sampling_rate,
        default=DEFAULT_RATE_HZ,
        metavar="HZ",
        help="samples of every thread per second (default: %(default)g)",
    )
    parser.add_argument(
        "--read-interval",
        type=bounded_float(0.0, 60_000.0),
        default=DEFAULT_READ_INTERVAL_MS,
        metavar="MS",
        help="milliseconds between reads of the hot code objects (default: %(default)g)",
    )
    parser.add_argument("-s", "--subprocesses", action="store_true", help="also every Python descendant (a server's workers)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    add_format_argument(parser, choices=("text", "json", "html"))


def _is_native_error(native, e: BaseException) -> bool:
    return isinstance(e, getattr(native, "GiltyError", ()))


def _one_line_reason(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    if "free-threaded" in msg:
        pid = msg.split()[1] if msg.startswith("pid ") else "?"
        return f"pid {pid} runs a free-threaded build: CPython disables specialization there, so there is nothing to report"
    return msg


def _check_target(native, pid: int) -> None:
    """Attach once before sampling, so a bad pid is one error line and nothing else."""
    try:
        target = launch.attach(native, pid)
    except Exception as e:  # noqa: BLE001
        if _is_native_error(native, e) and "free-threaded" in str(e):
            raise CommandError(_one_line_reason(e), EXIT_UNSUPPORTED) from None
        raise
    minor = tuple(int(x) for x in target.python_version.split(".")[:2])
    if minor < (3, 10):
        raise CommandError(
            f"pid {pid} runs Python {target.python_version}, which has neither an opcache nor a specializing interpreter",
            EXIT_UNSUPPORTED,
        )
    return minor


def _run_opcache(native, args, fmt: str) -> int:
    """3.10: the seed's opcache instead of PEP 659 specialization (one process)."""
    report.check("opcache", fmt)
    if args.subprocesses:
        print("gilty: Python 3.10: the opcache report covers --pid only, not its subprocesses", file=sys.stderr)
    print(
        f"gilty: sampling pid {args.pid} for {args.duration:g} s and reading its hot code's opcache (Python 3.10)",
        file=sys.stderr,
    )
    doc = native.specialization_opcache(args.pid, args.duration, rate_hz=args.rate, max_codes=max(args.top, 20))
    report.write(OpcacheResult(doc, args.top), fmt, args.output)
    return EXIT_OK


def _watch_all(native, pids: list, args) -> SpecializationSession:
    session = SpecializationSession(args.duration, args.rate, args.read_interval / 1e3)
    results: dict = {}
    # Ctrl-C or SIGTERM ends every watch early; each returns what it read so far (record's habit).
    native_stop = native.LoadStop()

    def one(pid: int) -> None:
        # The kernel hands a process-wide Ctrl-C to any thread that does not block it; one sleeping in
        # native code would leave the main thread asleep in join() for the whole --duration.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            results[pid] = native.specialization_watch(
                pid,
                args.duration,
                rate_hz=args.rate,
                read_interval_s=args.read_interval / 1e3,
                max_codes=MAX_CODES,
                stop=native_stop,
            )
        except Exception as e:  # noqa: BLE001 - reported per process below
            results[pid] = e

    threads = [threading.Thread(target=one, args=(pid,), daemon=True) for pid in pids]
    with launch.StopSignals() as stop:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():  # a timed join lets a signal handler run in the main thread
                t.join(0.2)
                if stop.requested:
                    native_stop.set()
    if stop.requested:
        what = "Ctrl-C" if stop.signum == signal.SIGINT else "SIGTERM"
        elapsed = max((r["elapsed_s"] for r in results.values() if isinstance(r, dict)), default=0.0)
        session.partial_reason = f"stopped by {what} after {elapsed:.1f} s of the requested {args.duration:g} s"
    for pid in pids:
        r = results[pid]
        if isinstance(r, BaseException):
            if pid == args.pid:
                if _is_native_error(native, r):
                    code = EXIT_UNSUPPORTED if "free-threaded" in str(r) else exit_code_for_kind(getattr(r, "kind", "internal"))
                    raise CommandError(_one_line_reason(r), code)
                raise r
            session.skipped[pid] = _one_line_reason(r)
        else:
            session.processes.append(ProcessWatch(pid, r))
    return session


def run(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output, ("text", "json", "html"))
    check_output(args.output)
    native = launch.native_module()
    if _check_target(native, args.pid) == (3, 10):
        return _run_opcache(native, args, fmt)
    pids = [args.pid]
    if args.subprocesses:
        from gilty.sampling.processes import _python_descendants

        pids += sorted(_python_descendants(args.pid))
    print(f"gilty: sampling pid {', '.join(map(str, pids))} for {args.duration:g} s and reading its hot code", file=sys.stderr)
    session = _watch_all(native, pids, args)
    read_sources(session)  # while the targets live: a saved report carries its lines
    status = EXIT_OK
    for w in [] if session.partial_reason else session.processes:  # an interrupted run is the user's choice: exit 0
        elapsed = w.raw["elapsed_s"]
        if elapsed < args.duration * 0.9:
            session.partial_reason = f"pid {w.pid} exited after {elapsed:.1f} s of the requested {args.duration:g} s"
            status = EXIT_PARTIAL
    if session.partial_reason:
        print(f"gilty: {session.partial_reason}; the result is PARTIAL", file=sys.stderr)
    analysis = analyse(session, args.top)
    report.write(SpecializationResult(session, analysis, args.top), fmt, args.output)
    return status
