"""`gilty top`'s run: sample the processes and hand a window of the last second to the screen once a
second (``show``), until q, Ctrl-C, SIGTERM, every process's exit, or --duration. The windows are
Sessions sharing their stack, frame and name tables with the one before (Session.window); drawing
them is the report layer's live screen (gilty.report.live).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional, TextIO

from gilty._errors import EXIT_OK, EXIT_TARGET_EXITED, CommandError
from gilty.options import TopOptions
from gilty.sampling import capture, launch, processes
from gilty.sampling.record_run import open_sampler
from gilty.sampling.session import Recording, Session, TargetInfo

REFRESH_S = 1.0
# A window is due a hair early rather than a slice late.
DUE_EARLY_S = 1e-3


def run(options: TopOptions, stop: Any, show_one: Callable, show_processes: Callable, on_slice=None, err=None) -> int:
    """Watch as ``options`` say. With --exact (one process) each window goes to ``show_one(window,
    elapsed_s)``; otherwise the process set's Recording, its sessions holding the last window, goes
    to ``show_processes(recording, elapsed_s)``, and ``on_slice()`` runs after every slice (the
    screen reads its keys there). Returns the exit status."""
    err = sys.stderr if err is None else err
    native = launch.native_module()
    target, sampling = options.target, options.sampling
    if sampling.exact:
        return _run_exact(native, target.pids[0], options, stop, show_one, err)
    process_set = native.ProcessSet(list(target.pids), sampling.rate_hz, follow=target.subprocesses)
    recording = Recording(rate_hz=sampling.rate_hz)
    recording.subprocesses = target.subprocesses
    tracker = processes.ProcessTracker(recording, native.syscall_name, err)
    total, finished = watch_processes(process_set, recording, tracker, sampling.duration_s, stop, show_processes, on_slice)
    if finished:
        if total == 0:
            raise CommandError(f"pid {', '.join(map(str, target.pids))} exited before anything was recorded", EXIT_TARGET_EXITED)
        print("gilty: every watched process exited", file=err)
    return EXIT_OK


def _run_exact(native: Any, pid: int, options: TopOptions, stop: Any, show_one: Callable, err: TextIO) -> int:
    """One process with exact (uprobe) figures beside the sampled ones."""
    target = launch.attach(native, pid)
    base = Session(TargetInfo.from_native(target), options.sampling.rate_hz)  # before Sampler takes the reader
    sampler = open_sampler(native, target, options.sampling.rate_hz, True)
    total, exited = watch(base, sampler, options.sampling.duration_s, stop, native.GiltyError, show_one, native.syscall_name)
    if exited:
        if total == 0:
            raise CommandError(f"pid {pid} exited before anything was recorded", EXIT_TARGET_EXITED)
        print(f"gilty: pid {pid} exited", file=err)
    return EXIT_OK


def watch(
    base: Session,
    sampler: Any,
    duration_s: Optional[float],
    stop: Any,
    native_error: type[BaseException],
    show: Callable[[Session, float], None],
    syscall_name: Optional[Callable[[int], str]] = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple:
    """One Sampler: a window to ``show`` per REFRESH_S, and the last, shorter one at the end.
    Returns (samples seen, target exited)."""
    started = clock()
    now_window = {"window": base.window(), "started": started}
    total = [0]

    def shown(window: Session, elapsed_s: float) -> None:
        # With exact mode, the window also gets the exact figures of the same stretch.
        exact_window = getattr(sampler, "exact_window", None)
        if exact_window is not None and getattr(sampler, "exact_symbols", None):
            window.exact = exact_window()
        show(window, elapsed_s)

    def step(seconds: float) -> bool:
        window = now_window["window"]
        try:
            batch = sampler.collect(seconds)
        except native_error as e:
            if getattr(e, "kind", None) != "target_exited":
                raise
            return True
        window.add_batch(batch, syscall_name)
        total[0] += len(batch["times"])
        if batch.get("exited"):
            return True
        now = clock()
        if now - now_window["started"] >= REFRESH_S - DUE_EARLY_S:
            window.duration_s = now - now_window["started"]
            shown(window, now - started)
            now_window["window"], now_window["started"] = base.window(), now
        return False

    ended = capture.collect_until(step, base.period_s, duration_s, stop, clock, due=lambda now: now_window["started"] + REFRESH_S)
    window = now_window["window"]
    if window.samples:  # the last, shorter stretch
        window.duration_s = clock() - now_window["started"]
        shown(window, clock() - started)
    return total[0], ended.stopped_by == "target_exit"


def _clear_rows(recording: Recording) -> None:
    """Starts the next window: each live process gets an empty Session sharing the stack, frame and
    name tables (see Session.window); exited processes are dropped."""
    recording.sessions = [s.window() for s in recording.sessions if s.exited_at is None]


def watch_processes(
    process_set: Any,
    recording: Recording,
    tracker: processes.ProcessTracker,
    duration_s: Optional[float],
    stop: Any,
    show: Callable[[Recording, float], None],
    on_slice: Optional[Callable[[], None]] = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple:
    """Every process of the set: ``recording`` (one window per process) to ``show`` per REFRESH_S.
    Returns (passes seen, all exited)."""
    started = clock()
    window_started = [started]

    def step(seconds: float) -> bool:
        got = process_set.collect(seconds)
        tracker.add(got)
        if on_slice is not None:
            on_slice()
        if got["finished"]:
            return True
        now = clock()
        if now - window_started[0] >= REFRESH_S - DUE_EARLY_S:
            show(recording, now - started)
            _clear_rows(recording)
            window_started[0] = now
        return False

    period_s = 1.0 / recording.rate_hz
    ended = capture.collect_until(step, period_s, duration_s, stop, clock, due=lambda now: window_started[0] + REFRESH_S)
    if any(s.samples for s in recording.sessions):
        show(recording, clock() - started)
    return tracker.passes, ended.stopped_by == "target_exit"
