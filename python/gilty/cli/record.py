"""Sample a Python process and report who holds the GIL, who waits for it, and why.

Attach to a running process with --pid, or start one after `--`:

  gilty record --pid 4242 --duration 10
  gilty record --pid MASTER --subprocesses --duration 10   # a server: master and every worker
  gilty record --format json -o report.json -- python app.py

Sampling runs until --duration ends, the target exits, or Ctrl-C (the summary is still
printed). The command's own output goes to gilty's stderr. On a terminal, one line on stderr shows
the recording's progress (cli/progress.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Optional

from gilty import report as reports
from gilty._errors import (
    EXIT_EXACT_UNAVAILABLE,
    EXIT_GATE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_PYTHON,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_TARGET_EXITED,
    CommandError,
    UsageError,
)
from gilty.cli.options import (
    add_exact_argument,
    add_format_argument,
    add_picture_arguments,
    add_pid_arguments,
    add_tasks_argument,
    check_output,
    picture_options,
    sampling_rate,
    seconds,
)
from gilty.cli.progress import Progress
from gilty.report.output_file import WritePhase
from gilty.sampling import launch, processes
from gilty.sampling.analysis.gates import as_json as gates_json
from gilty.sampling.analysis.gates import describe_failure, evaluate, parse_gate
from gilty.sampling.session import Recording, Session, TargetInfo

ACCEPTS_CHILD_COMMAND = True
DEFAULT_RATE_HZ = 100.0
# Each collect() call samples this long with the GIL released; Ctrl-C is seen between calls.
CHUNK_S = 0.25


# -- the command ------------------------------------------------------------------------------


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "gilty record (--pid PID [--pid PID ...] | -- CMD [ARG ...]) [-s] [--duration S] [--rate HZ] [--exact] "
        "[--tasks] [--native] [-o FILE] [--format FORMAT]"
    )
    add_pid_arguments(parser)
    parser.add_argument("--duration", type=seconds, metavar="S", help="stop after S seconds (default: until Ctrl-C or exit)")
    parser.add_argument(
        "--rate",
        type=sampling_rate,
        default=DEFAULT_RATE_HZ,
        metavar="HZ",
        help="samples per second (default: %(default)g)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    add_format_argument(parser, reports.FORMAT_NAMES)
    add_picture_arguments(parser)
    add_exact_argument(parser)
    add_tasks_argument(parser)
    parser.add_argument(
        "--native",
        action="store_true",
        help="also sample each thread's C stack with perf events and show it between the Python frames "
        "(docs/cli.md; root, CAP_PERFMON or kernel.perf_event_paranoid<=1)",
    )
    parser.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="EXPR",
        help="exit 10 when EXPR holds, e.g. 'waiting_gil>0.2', 'thread=worker-*:wait>=30%%', 'gil_utilisation>0.9' (repeatable)",
    )


def sample_until_stopped(
    session: Session,
    sampler: Any,
    duration_s: Optional[float],
    stop: Any,
    native_error: type[BaseException],
    syscall_name: Optional[Callable[[int], str]] = None,
    clock: Callable[[], float] = time.monotonic,
    on_chunk: Optional[Callable[[], None]] = None,
    progress: Optional[Progress] = None,
) -> None:
    """Collect batches into ``session`` until the duration, the target's exit, or ``stop.requested``.

    Sets ``session.duration_s`` (wall time spent) and ``session.stopped_by``. ``progress`` is
    updated after every batch and cleared at the end.
    """
    started = clock()
    stopped_by = "interrupt"
    try:
        while not stop.requested:
            chunk = CHUNK_S
            if duration_s is not None:
                remaining = duration_s - (clock() - started)
                # Less than half a period left: one more pass would land past the end.
                if remaining < 0.5 * session.period_s:
                    stopped_by = "duration"
                    break
                chunk = min(chunk, remaining)
            try:
                batch = sampler.collect(chunk)
            except native_error as e:
                if getattr(e, "kind", None) != "target_exited":
                    raise
                session.exited = True
                stopped_by = "target_exit"
                break
            session.add_batch(batch, syscall_name)
            if on_chunk is not None:
                on_chunk()
            if progress is not None:
                progress.update(session.samples, len(session.thread_names))
            if batch.get("exited"):
                stopped_by = "target_exit"
                break
    except KeyboardInterrupt:  # a Ctrl-C that arrived before our handler was installed
        stopped_by = "interrupt"
    finally:
        if progress is not None:
            progress.clear()
    wall = clock() - started
    if session.times and session.last_time is not None:
        # No further than the last pass: on a host that kept gilty off a CPU, the time until it ran
        # again (and saw the command's exit) was not looked at, and would thin every rate.
        wall = min(wall, session.last_time - session.times[0] + session.period_s)
    session.duration_s = wall
    session.stopped_by = stopped_by


def finish(session: Session, launched: bool) -> int:
    """Exit status of a finished recording; marks it partial when the target left early.

    A target exiting is how a `-- CMD` recording normally ends. With --pid and a --duration
    it means the result covers less time than asked for: partial, exit 8.
    """
    if session.stopped_by == "target_exit":
        if session.samples == 0:
            raise CommandError(f"pid {session.target.pid} exited before anything was recorded", EXIT_TARGET_EXITED)
        requested = session.requested_duration_s
        if not launched and requested is not None and session.duration_s < requested:
            session.mark_partial(
                f"pid {session.target.pid} exited after {session.duration_s:.1f} s of the requested {requested:g} s"
            )
            return EXIT_PARTIAL
    return EXIT_OK


def open_sampler(native: Any, target: Any, rate_hz: float, exact: bool, tasks: bool = False, stacks_c: bool = False) -> Any:
    """A Sampler, with uprobe tracing attached when ``exact``, asyncio tasks read in every pass
    when ``tasks`` and native stacks joined when ``stacks_c``; a refusal is one line, exit 9 (exact)
    or 6 (perf events not permitted)."""
    extra = {"tasks": True} if tasks else {}
    if stacks_c:
        extra["native"] = True
    if not exact:
        return native.Sampler(target, rate_hz, **extra)
    try:
        return native.Sampler(target, rate_hz, exact=True, **extra)
    except native.GiltyError as e:
        if getattr(e, "kind", None) == "exact_unavailable":
            raise CommandError(f"{e} (record without --exact to sample only)", EXIT_EXACT_UNAVAILABLE) from None
        raise


def exact_summary(sampler: Any) -> Optional[dict]:
    raw = sampler.exact_summary()
    if raw is not None:
        raw["symbols"] = list(sampler.exact_symbols)
    return raw


def run(args: argparse.Namespace) -> int:
    child_argv = getattr(args, "child_argv", None)
    pids = args.pid or []
    if bool(pids) == (child_argv is not None):
        raise UsageError("give either --pid PID or -- CMD [ARG ...] (see `gilty record --help`)")
    fmt = reports.output_format(args.format, args.output)  # a bad -o fails before recording
    check_output(args.output)
    args.gates = [parse_gate(text) for text in args.fail_if]  # a bad gate too
    if args.subprocesses or len(pids) > 1:
        if getattr(args, "tasks", False):
            raise UsageError("--tasks reads one process's event loops: leave out --subprocesses and give one --pid")
        if args.exact:
            raise UsageError("--exact traces one process: leave out --subprocesses and give one --pid")
        return run_processes(args, pids, child_argv, fmt)
    args.pid = pids[0] if pids else None
    native = launch.native_module()

    # Signals are caught from the start, so that a SIGTERM while CMD starts still stops CMD.
    with launch.StopSignals() as stop:
        child = None
        try:
            if child_argv is not None:
                child = launch.start_command(child_argv, die_with_gilty=True)
                target = launch.attach_to_command(native, child, child_argv, stop=stop)
            else:
                target = launch.attach(native, args.pid)
            # Read before creating the Sampler: the native Target hands its reader over to it.
            session = Session(TargetInfo.from_native(target), args.rate)
            session.command = child_argv
            session.requested_duration_s = args.duration
            sampler = open_sampler(
                native, target, args.rate, args.exact, getattr(args, "tasks", False), getattr(args, "native", False)
            )
            # Cheap (/proc/PID/stat only): were Python children doing the work we are not recording?
            children_cpu = processes.ChildrenCpu(session.target.pid)
            until = f"for {args.duration:g} s" if args.duration else "until Ctrl-C"
            print(
                f"gilty: recording pid {session.target.pid} (Python {session.target.python_version}) at {args.rate:g} Hz {until}",
                file=sys.stderr,
            )
            try:
                sample_until_stopped(
                    session,
                    sampler,
                    args.duration,
                    stop,
                    native.GiltyError,
                    native.syscall_name,
                    on_chunk=children_cpu.poll,
                    progress=Progress(sys.stderr),
                )
            finally:
                if args.exact:
                    session.exact = exact_summary(sampler)
        finally:
            child_status = launch.terminate(child) if child is not None else None

    with WritePhase(args.output):  # from the recording's end: a second Ctrl-C does not lose it
        status = finish(session, launched=child is not None)
        if session.partial:
            print(f"gilty: {session.partial_reason}; the result is PARTIAL", file=sys.stderr)
        recording = Recording.of(session)
        hint = children_cpu.hint(session.duration_s)
        if hint:
            recording.notes.append(hint)
            print(f"gilty: hint: {hint}", file=sys.stderr)
        status = judge(recording, args.gates, status, child_status if session.stopped_by == "target_exit" else None)
        reports.write(recording, fmt, args.output, picture_options(args))
    return status


def judge(recording: Recording, gates: list, status: int, command_status: Optional[int]) -> int:
    """The exit status after the --fail-if gates: 10 when one held (each said on stderr), else the
    status of a `-- CMD` that ended by itself (its own, kept in the report), else ``status``."""
    if command_status is not None:
        # A signal's death as shells report it (128 + signal number).
        recording.command_status = command_status if command_status >= 0 else 128 - command_status
    if gates:
        from gilty.sampling.analysis import summarise

        results = evaluate(gates, [(s.target.pid, summarise(s)) for s in recording.sessions if s.samples])
        recording.gates = gates_json(results)
        failed = [r for r in results if not r.passed]
        for r in failed:
            print(f"gilty: {describe_failure(r)}", file=sys.stderr)
        if failed:
            return EXIT_GATE_FAILED
    if recording.command_status is not None and status == EXIT_OK:
        return recording.command_status
    return status


def run_processes(args: argparse.Namespace, pids: list, child_argv: Optional[list], fmt: str) -> int:
    """Several processes on one schedule: the given pids (or CMD) and, with -s, their Python descendants."""
    native = launch.native_module()
    recording = Recording(rate_hz=args.rate)
    recording.command = child_argv
    recording.requested_duration_s = args.duration
    recording.subprocesses = bool(args.subprocesses)
    tracker = processes.ProcessTracker(recording, native.syscall_name, sys.stderr)
    with launch.StopSignals() as stop:
        child = None
        try:
            if child_argv is not None:
                child = launch.start_command(child_argv, die_with_gilty=True)
                pids = [child.pid]
            process_set = native.ProcessSet(
                pids, args.rate, follow=bool(args.subprocesses), native=bool(getattr(args, "native", False))
            )
            recording.start_time = time.time()
            until = f"for {args.duration:g} s" if args.duration else "until Ctrl-C"
            what = "and its Python descendants" if args.subprocesses else ""
            print(
                f"gilty: recording pid {', '.join(map(str, pids))} {what} at {args.rate:g} Hz {until}".replace("  ", " "),
                file=sys.stderr,
            )
            progress = Progress(sys.stderr)

            def show_progress() -> None:
                sessions = recording.sessions
                progress.update(tracker.passes, sum(len(s.thread_names) for s in sessions), len(sessions))

            try:
                processes.sample_processes(tracker, process_set, args.duration, stop, time.monotonic, show_progress)
            finally:
                progress.clear()
        finally:
            child_status = launch.terminate(child) if child is not None else None
    with WritePhase(args.output):  # from the recording's end: a second Ctrl-C does not lose it
        return _finish_processes(args, recording, tracker, pids, child, child_status, fmt)


def _finish_processes(
    args, recording: Recording, tracker: Any, pids: list, child: Any, child_status: Optional[int], fmt: str
) -> int:
    if recording.stopped_by == "interrupt" and (not recording.sessions or tracker.passes == 0):
        # Ctrl-C before the first pass: nothing was looked at yet, which says nothing about the targets.
        print("gilty: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not recording.sessions:
        raise CommandError(f"no Python process found in pid {', '.join(map(str, pids))} or its descendants", EXIT_NOT_PYTHON)
    if tracker.passes == 0:
        raise CommandError("every process exited before anything was recorded", EXIT_TARGET_EXITED)
    status = EXIT_OK
    requested = args.duration
    if recording.stopped_by == "target_exit" and child is None and requested is not None and recording.duration_s < requested:
        recording.mark_partial(f"every process exited after {recording.duration_s:.1f} s of the requested {requested:g} s")
        print(f"gilty: {recording.partial_reason}; the result is PARTIAL", file=sys.stderr)
        status = EXIT_PARTIAL
    exited = [s for s in recording.sessions if s.exited_at is not None]
    print(
        f"gilty: recorded {len(recording.sessions)} process{'es' if len(recording.sessions) != 1 else ''}"
        + (f", {len(exited)} exited during the recording" if exited else "")
        + (f", {len(recording.skipped)} skipped" if recording.skipped else ""),
        file=sys.stderr,
    )
    status = judge(recording, args.gates, status, child_status if recording.stopped_by == "target_exit" else None)
    reports.write(recording, fmt, args.output, picture_options(args))
    return status
