"""One `gilty specialization` run: the target (and with --subprocesses its Python descendants)
sampled and its hot code's adaptive bytecode read, one watch per process in a thread of its own;
on Python 3.10 the opcache that preceded specialization."""

from __future__ import annotations

import signal
import sys
from typing import Any, Union

from gilty._errors import EXIT_OK, EXIT_PARTIAL, EXIT_UNSUPPORTED, CommandError, UsageError, exit_code_for_kind
from gilty.options import SpecializationOptions
from gilty.sampling import capture, launch
from gilty.specialization.analysis import analyse
from gilty.specialization.result import OpcacheResult, SpecializationResult
from gilty.specialization.session import ProcessWatch, SpecializationSession
from gilty.specialization.sources import read_sources

MAX_CODES = 200
# `gilty specialization`'s defaults, the command line's and the mcp tool's (assist/tools.py).
DEFAULT_DURATION_S = 5.0
DEFAULT_RATE_HZ = 500.0
DEFAULT_READ_INTERVAL_MS = 5.0
DEFAULT_TOP = 10


def run(options: SpecializationOptions, stop: Any) -> Union[SpecializationResult, OpcacheResult]:
    native = launch.native_module()
    minor = _check_target(native, options.pid)
    if stop.requested:
        raise KeyboardInterrupt  # before anything was read: `gilty: interrupted`, 130
    if minor == (3, 10):
        return _opcache(native, options, stop)
    pids = [options.pid]
    if options.subprocesses:
        from gilty.sampling.processes import _python_descendants

        pids += sorted(_python_descendants(options.pid))
    print(
        f"gilty: sampling pid {', '.join(map(str, pids))} for {options.duration_s:g} s and reading its hot code",
        file=sys.stderr,
    )
    session = _watch_all(native, pids, options, stop)
    read_sources(session)  # while the targets live: a saved report carries its lines
    exited_early = False
    for w in [] if session.partial_reason else session.processes:  # an interrupted run is the user's choice: exit 0
        elapsed = w.raw["elapsed_s"]
        if elapsed < options.duration_s * 0.9:
            session.partial_reason = f"pid {w.pid} exited after {elapsed:.1f} s of the requested {options.duration_s:g} s"
            exited_early = True
    if session.partial_reason:
        print(f"gilty: {session.partial_reason}; the result is PARTIAL", file=sys.stderr)
    return SpecializationResult(session, analyse(session, options.top), options.top, exited_early)


def exit_status(result: Union[SpecializationResult, OpcacheResult]) -> int:
    """Exit 8 when a process exited before the requested duration; a Ctrl-C'd run is the user's choice: 0."""
    return EXIT_PARTIAL if isinstance(result, SpecializationResult) and result.exited_early else EXIT_OK


def _is_native_error(native, e: BaseException) -> bool:
    return isinstance(e, getattr(native, "GiltyError", ()))


def one_line_reason(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    if "free-threaded" in msg:
        pid = msg.split()[1] if msg.startswith("pid ") else "?"
        return f"pid {pid} runs a free-threaded build: CPython disables specialization there, so there is nothing to report"
    return msg


def _check_target(native, pid: int) -> tuple:
    """Attach once before sampling, so a bad pid is one error line and nothing else."""
    try:
        target = launch.attach(native, pid)
    except Exception as e:  # noqa: BLE001
        if _is_native_error(native, e) and "free-threaded" in str(e):
            raise CommandError(one_line_reason(e), EXIT_UNSUPPORTED) from None
        raise
    minor = tuple(int(x) for x in target.python_version.split(".")[:2])
    if minor < (3, 10):
        raise CommandError(
            f"pid {pid} runs Python {target.python_version}, which has neither an opcache nor a specializing interpreter",
            EXIT_UNSUPPORTED,
        )
    return minor


def _opcache(native, options: SpecializationOptions, stop: Any) -> OpcacheResult:
    """3.10: the seed's opcache instead of PEP 659 specialization (one process)."""
    if not options.opcache_output:
        raise UsageError("the Python 3.10 opcache report is text or json")
    if options.subprocesses:
        print("gilty: Python 3.10: the opcache report covers --pid only, not its subprocesses", file=sys.stderr)
    print(
        f"gilty: sampling pid {options.pid} for {options.duration_s:g} s and reading its hot code's opcache (Python 3.10)",
        file=sys.stderr,
    )
    doc = native.specialization_opcache(options.pid, options.duration_s, rate_hz=options.rate_hz, max_codes=max(options.top, 20))
    if stop.requested:
        raise KeyboardInterrupt  # the native read does not stop early: a Ctrl-C during it is `gilty: interrupted`
    return OpcacheResult(doc, options.top)


def _watch_all(native, pids: list, options: SpecializationOptions, stop: Any) -> SpecializationSession:
    session = SpecializationSession(options.duration_s, options.rate_hz, options.read_interval_s)
    # Ctrl-C or SIGTERM ends every watch early; each returns what it read so far (record's habit).
    native_stop = native.LoadStop()

    def one(pid: int):
        try:
            return native.specialization_watch(
                pid,
                options.duration_s,
                rate_hz=options.rate_hz,
                read_interval_s=options.read_interval_s,
                max_codes=MAX_CODES,
                stop=native_stop,
            )
        except Exception as e:  # noqa: BLE001 - reported per process below
            return e

    def watch_all() -> dict:
        # The kernel hands a process-wide Ctrl-C to any thread that does not block it: these threads
        # (and the watches they start, which inherit the mask) leave it to the main thread.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        watches = {pid: capture.in_thread(lambda pid=pid: one(pid), f"gilty-specialization-{pid}") for pid in pids}
        return {pid: watch.result() for pid, watch in watches.items()}

    results = capture.wait_for(watch_all, stop, native_stop.set, "gilty-specialization")
    if stop.requested:
        what = "Ctrl-C" if stop.signum == signal.SIGINT else "SIGTERM"
        elapsed = max((r["elapsed_s"] for r in results.values() if isinstance(r, dict)), default=0.0)
        session.partial_reason = f"stopped by {what} after {elapsed:.1f} s of the requested {options.duration_s:g} s"
    for pid in pids:
        r = results[pid]
        if isinstance(r, BaseException):
            if pid == options.pid:
                if _is_native_error(native, r):
                    code = EXIT_UNSUPPORTED if "free-threaded" in str(r) else exit_code_for_kind(getattr(r, "kind", "internal"))
                    raise CommandError(one_line_reason(r), code)
                raise r
            session.skipped[pid] = one_line_reason(r)
        else:
            session.processes.append(ProcessWatch(pid, r))
    return session
