"""`gilty record`'s run: attach to the pid (or start `-- CMD` and attach to the Python inside it),
sample until the duration ends, the user stops or the target exits (gilty.sampling.capture's loop),
and hand back the Recording with the exit status it earns: partial (8), a --fail-if gate that held
(10), or the command's own status. Several processes (several --pid, -s) are one process set on one
schedule. What it says while it runs goes to ``err`` (gilty's stderr), never to stdout.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, TextIO

from gilty._errors import (
    EXIT_EXACT_UNAVAILABLE,
    EXIT_GATE_FAILED,
    EXIT_NOT_PYTHON,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_TARGET_EXITED,
    CommandError,
)
from gilty.options import RecordOptions
from gilty.sampling import capture, launch, processes
from gilty.sampling.analysis.gates import as_json as gates_json
from gilty.sampling.analysis.gates import describe_failure, evaluate
from gilty.sampling.recorded_sources import SourceKeeper
from gilty.sampling.session import Recording, Session, TargetInfo


@dataclass
class RecordResult:
    recording: Recording
    status: int  # the exit status gilty ends with
    # The sampler, held until the caller has written the report and drops the result: dropping it
    # removes --exact's probes, which on the uprobe PMU path takes seconds (threads x probes closes),
    # and the answer comes first.
    sampler: Any = None


def run(options: RecordOptions, stop: Any, err: Optional[TextIO] = None) -> RecordResult:
    """Record as ``options`` say until one of the ends; ``stop`` is the user's (capture.Stop)."""
    err = sys.stderr if err is None else err
    if options.target.several:
        return _run_processes(options, stop, err)
    return _run_one(options, stop, err)


def _until(duration_s: Optional[float]) -> str:
    return f"for {duration_s:g} s" if duration_s else "until Ctrl-C"


def _run_one(options: RecordOptions, stop: Any, err: TextIO) -> RecordResult:
    sampling = options.sampling
    native = launch.native_module()
    with capture.Command(options.target.command) as command:
        if command.process is not None:
            target = launch.attach_to_command(native, command.process, command.argv, stop=stop)
        else:
            target = launch.attach(native, options.target.pids[0])
        # Read before creating the Sampler: the native Target hands its reader over to it.
        session = Session(TargetInfo.from_native(target), sampling.rate_hz)
        session.command = options.target.command
        session.requested_duration_s = sampling.duration_s
        sampler = open_sampler(native, target, sampling.rate_hz, sampling.exact, sampling.tasks, sampling.native)
        # Cheap (/proc/PID/stat only): were Python children doing the work we are not recording?
        children_cpu = processes.ChildrenCpu(session.target.pid)
        # The hot functions' source lines, read while the target lives (the HTML source view).
        sources = SourceKeeper(session, options.output.source_functions)
        watch = None
        if options.free_threading is not None:
            from gilty.readiness.watch import ModuleWatch

            watch = ModuleWatch(target, native.GiltyError)
            watch.read()  # before the first batch: a short recording gets a scan too

        def on_chunk() -> None:
            children_cpu.poll()
            sources.poll()
            if watch is not None:
                watch.poll()

        print(
            f"gilty: recording pid {session.target.pid} (Python {session.target.python_version}) at {sampling.rate_hz:g} Hz "
            f"{_until(sampling.duration_s)}",
            file=err,
        )
        try:
            sample_until_stopped(
                session,
                sampler,
                sampling.duration_s,
                stop,
                native.GiltyError,
                native.syscall_name,
                on_chunk=on_chunk,
                progress=capture.Progress(err),
            )
        finally:
            if sampling.exact:
                session.exact = exact_summary(sampler)
            if watch is not None:
                if not session.exited:
                    watch.read()
                session.free_threading = watch.result(options.free_threading)
        sources.finish()
    status = finish(session, launched=command.process is not None)
    if session.partial:
        print(f"gilty: {session.partial_reason}; the result is PARTIAL", file=err)
    recording = Recording.of(session)
    hint = children_cpu.hint(session.duration_s)
    if hint:
        recording.notes.append(hint)
        print(f"gilty: hint: {hint}", file=err)
    status = judge(recording, options.gates, status, command.status if session.stopped_by == "target_exit" else None, err)
    return RecordResult(recording, status, sampler)


def sample_until_stopped(
    session: Session,
    sampler: Any,
    duration_s: Optional[float],
    stop: Any,
    native_error: type[BaseException],
    syscall_name: Optional[Callable[[int], str]] = None,
    clock: Callable[[], float] = time.monotonic,
    on_chunk: Optional[Callable[[], None]] = None,
    progress: Optional[capture.Progress] = None,
) -> None:
    """Collect batches of one Sampler into ``session`` in the capture loop; sets
    ``session.duration_s`` (wall time spent) and ``session.stopped_by``."""

    def step(seconds: float) -> bool:
        try:
            batch = sampler.collect(seconds)
        except native_error as e:
            if getattr(e, "kind", None) != "target_exited":
                raise
            session.exited = True
            return True
        session.add_batch(batch, syscall_name)
        if on_chunk is not None:
            on_chunk()
        return bool(batch.get("exited"))

    def tally() -> tuple:
        return session.samples, len(session.thread_names)

    ended = capture.collect_until(step, session.period_s, duration_s, stop, clock, progress=progress, tally=tally)
    wall = ended.wall_s
    if session.times and session.last_time is not None:
        # No further than the last pass: on a host that kept gilty off a CPU, the time until it ran
        # again (and saw the command's exit) was not looked at, and would thin every rate.
        wall = min(wall, session.last_time - session.times[0] + session.period_s)
    session.duration_s = wall
    session.stopped_by = ended.stopped_by


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


def judge(recording: Recording, gates: tuple, status: int, command_status: Optional[int], err: Optional[TextIO] = None) -> int:
    """The exit status after the --fail-if gates: 10 when one held (each said on ``err``), else the
    status of a `-- CMD` that ended by itself (its own, kept in the report), else ``status``."""
    if command_status is not None:
        # A signal's death as shells report it (128 + signal number).
        recording.command_status = command_status if command_status >= 0 else 128 - command_status
    if gates:
        from gilty.sampling.analysis import summarise

        results = evaluate(list(gates), [(s.target.pid, summarise(s)) for s in recording.sessions if s.samples])
        recording.gates = gates_json(results)
        failed = [r for r in results if not r.passed]
        for r in failed:
            print(f"gilty: {describe_failure(r)}", file=sys.stderr if err is None else err)
        if failed:
            return EXIT_GATE_FAILED
    if recording.command_status is not None and status == EXIT_OK:
        return recording.command_status
    return status


def _run_processes(options: RecordOptions, stop: Any, err: TextIO) -> RecordResult:
    """Several processes on one schedule: the given pids (or CMD) and, with -s, their Python descendants."""
    sampling, target = options.sampling, options.target
    native = launch.native_module()
    recording = Recording(rate_hz=sampling.rate_hz)
    recording.command = target.command
    recording.requested_duration_s = sampling.duration_s
    recording.subprocesses = target.subprocesses
    tracker = processes.ProcessTracker(recording, native.syscall_name, err)
    pids = list(target.pids)
    with capture.Command(target.command) as command:
        if command.process is not None:
            pids = [command.process.pid]
        process_set = native.ProcessSet(pids, sampling.rate_hz, follow=target.subprocesses, native=sampling.native)
        recording.start_time = time.time()
        what = "and its Python descendants" if target.subprocesses else ""
        print(
            f"gilty: recording pid {', '.join(map(str, pids))} {what} at {sampling.rate_hz:g} Hz "
            f"{_until(sampling.duration_s)}".replace("  ", " "),
            file=err,
        )

        def tally() -> tuple:
            sessions = recording.sessions
            return tracker.passes, sum(len(s.thread_names) for s in sessions), len(sessions)

        keepers: dict = {}  # pid -> SourceKeeper, one per process seen (the HTML source view)

        def on_slice() -> None:
            for session in recording.sessions:
                keeper = keepers.get(session.target.pid)
                if keeper is None:
                    keeper = keepers[session.target.pid] = SourceKeeper(session, options.output.source_functions)
                keeper.poll()

        processes.sample_processes(
            tracker, process_set, sampling.duration_s, stop, on_slice=on_slice, progress=capture.Progress(err), tally=tally
        )
        for session in recording.sessions:
            keeper = keepers.get(session.target.pid)
            (keeper or SourceKeeper(session, options.output.source_functions)).finish()
    if recording.stopped_by == "interrupt" and (not recording.sessions or tracker.passes == 0):
        # Ctrl-C before the first pass: nothing was looked at yet, which says nothing about the
        # targets. As any other interrupt: `gilty: interrupted`, exit 130.
        raise KeyboardInterrupt
    if not recording.sessions:
        raise CommandError(f"no Python process found in pid {', '.join(map(str, pids))} or its descendants", EXIT_NOT_PYTHON)
    if tracker.passes == 0:
        raise CommandError("every process exited before anything was recorded", EXIT_TARGET_EXITED)
    status = EXIT_OK
    requested = sampling.duration_s
    launched = command.process is not None
    if recording.stopped_by == "target_exit" and not launched and requested is not None and recording.duration_s < requested:
        recording.mark_partial(f"every process exited after {recording.duration_s:.1f} s of the requested {requested:g} s")
        print(f"gilty: {recording.partial_reason}; the result is PARTIAL", file=err)
        status = EXIT_PARTIAL
    if options.free_threading is not None:
        for s in recording.sessions:
            s.free_threading = {
                "slowdown": options.free_threading,
                "modules": None,
                "modules_error": "modules are read for one process (--pid without --subprocesses)",
            }
    exited = [s for s in recording.sessions if s.exited_at is not None]
    print(
        f"gilty: recorded {len(recording.sessions)} process{'es' if len(recording.sessions) != 1 else ''}"
        + (f", {len(exited)} exited during the recording" if exited else "")
        + (f", {len(recording.skipped)} skipped" if recording.skipped else ""),
        file=err,
    )
    status = judge(recording, options.gates, status, command.status if recording.stopped_by == "target_exit" else None, err)
    return RecordResult(recording, status)
