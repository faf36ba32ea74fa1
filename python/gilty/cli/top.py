"""Live view: each thread's state shares over the last second, and where it is.

  gilty top --pid 4242
  gilty top --pid MASTER -s --sort wait     # a server: master and workers, pools on one line

Refreshes every second (in place on a terminal, fitted to it; one block per second otherwise)
until q, Ctrl-C, SIGTERM, every process's exit, or --duration. On a terminal, h / w / c sort by
GIL held, GIL waited for, or CPU.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import sys
import termios
import time
import tty
from typing import Any, Callable, Optional, TextIO

from gilty._errors import EXIT_OK, EXIT_TARGET_EXITED, EXIT_USAGE, CommandError
from gilty.cli.options import add_exact_argument, add_pid_arguments, sampling_rate, seconds
from gilty.cli.record import CHUNK_S, DEFAULT_RATE_HZ, open_sampler
from gilty.report.recording import text_processes as console_processes
from gilty.report.recording.text import render_top
from gilty.report.labels import displayed, displayed_session, terminal_text
from gilty.sampling import launch, processes
from gilty.sampling.session import Recording, Session, TargetInfo

REFRESH_S = 1.0
CLEAR_AND_HOME = "\x1b[2J\x1b[H"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_pid_arguments(parser, required=True)
    parser.add_argument(
        "--sort",
        choices=console_processes.SORT_KEYS,
        default="hold",
        help="order processes and threads by GIL held, GIL waited for, or CPU (default: %(default)s)",
    )
    parser.add_argument(
        "--rate",
        type=sampling_rate,
        default=DEFAULT_RATE_HZ,
        metavar="HZ",
        help="samples per second (default: %(default)g)",
    )
    parser.add_argument("--duration", type=seconds, metavar="S", help="stop after S seconds (default: until Ctrl-C or exit)")
    add_exact_argument(parser)


def show(window: Session, elapsed_s: float, out: TextIO, tty: bool, sampler: Any = None) -> None:
    # With exact mode, the window also gets the exact figures of the same stretch.
    exact_window = getattr(sampler, "exact_window", None) if sampler is not None else None
    if exact_window is not None and getattr(sampler, "exact_symbols", None):
        window.exact = exact_window()
    frame = terminal_text(render_top(displayed_session(window), elapsed_s))
    out.write(CLEAR_AND_HOME + frame if tty else frame + "\n")
    out.flush()


def watch(
    base: Session,
    sampler: Any,
    duration_s: Optional[float],
    stop: Any,
    native_error: type[BaseException],
    out: TextIO,
    tty: bool,
    syscall_name: Optional[Callable[[int], str]] = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple:
    """Sample and show one frame per REFRESH_S. Returns (samples seen, target exited)."""
    started = window_started = clock()
    window = base.window()
    total = 0
    exited = False
    try:
        while not stop.requested:
            now = clock()
            chunk = min(CHUNK_S, window_started + REFRESH_S - now)
            if duration_s is not None:
                remaining = duration_s - (now - started)
                if remaining < 0.5 * base.period_s:
                    break
                chunk = min(chunk, remaining)
            try:
                # Never longer than a chunk, whatever the period: a stop request is seen between calls.
                batch = sampler.collect(max(chunk, 1e-3))
            except native_error as e:
                if getattr(e, "kind", None) != "target_exited":
                    raise
                exited = True
                break
            window.add_batch(batch, syscall_name)
            total += len(batch["times"])
            if batch.get("exited"):
                exited = True
                break
            now = clock()
            if now - window_started >= REFRESH_S - 1e-3:
                window.duration_s = now - window_started
                show(window, now - started, out, tty, sampler)
                window, window_started = base.window(), now
    except KeyboardInterrupt:
        pass
    if window.samples:  # the last, shorter stretch
        window.duration_s = clock() - window_started
        show(window, clock() - started, out, tty, sampler)
    return total, exited


class Keys:
    """Single key presses from a terminal stdin (cbreak mode, restored on exit); inert otherwise."""

    def __init__(self, stream=None) -> None:
        self.stream = sys.stdin if stream is None else stream
        self.fd: Optional[int] = None
        self._saved: Optional[list] = None

    def __enter__(self) -> "Keys":
        try:
            if self.stream.isatty():
                self.fd = self.stream.fileno()
                self._saved = termios.tcgetattr(self.fd)
                tty.setcbreak(self.fd)
        except (OSError, ValueError, termios.error):
            self.fd = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None and self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    @property
    def active(self) -> bool:
        return self.fd is not None

    def pressed(self) -> str:
        """Keys typed since the last call ("" when none)."""
        if self.fd is None:
            return ""
        got = ""
        while select.select([self.fd], [], [], 0)[0]:
            data = os.read(self.fd, 64)
            if not data:
                break
            got += data.decode(errors="replace")
        return got


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
    out: TextIO,
    tty_out: bool,
    sort: str,
    keys: Optional[Keys] = None,
    clock: Callable[[], float] = time.monotonic,
    size: Callable[[], tuple] = lambda: (80, 24),
) -> tuple:
    """One frame per REFRESH_S of every process in the set. Returns (passes seen, all exited)."""
    started = window_started = clock()
    state = {"sort": sort}
    quit_requested = {"q": False}

    def on_slice() -> None:
        if keys is None:
            return
        for ch in keys.pressed():
            if ch.lower() == "q":
                quit_requested["q"] = True
            new = console_processes.sort_key_for(ch)
            if new:
                state["sort"] = new

    class _Stop:
        @property
        def requested(self) -> bool:
            return stop.requested or quit_requested["q"]

    def draw(now: float) -> None:
        width, height = size()
        frame = console_processes.render_top(
            displayed(recording),
            now - started,
            state["sort"],
            width,
            height - 1 if tty_out else height,
            keys=keys is not None and keys.active,
        )
        frame = terminal_text(frame)
        out.write(CLEAR_AND_HOME + frame if tty_out else frame + "\n")
        out.flush()

    finished = False
    stopper = _Stop()
    while not stopper.requested:
        now = clock()
        slice_s = min(processes.SLICE_S, max(window_started + REFRESH_S - now, 1e-3))
        if duration_s is not None:
            remaining = duration_s - (now - started)
            if remaining <= 1e-3:
                break
            slice_s = min(slice_s, remaining)
        try:
            got = process_set.collect(slice_s)
        except KeyboardInterrupt:
            break
        tracker.add(got)
        on_slice()
        if got["finished"]:
            finished = True
            break
        now = clock()
        if now - window_started >= REFRESH_S - 1e-3:
            draw(now)
            _clear_rows(recording)
            window_started = now
    if any(s.samples for s in recording.sessions):
        draw(clock())
    return tracker.passes, finished


def _terminal_size() -> tuple:
    size = shutil.get_terminal_size((80, 24))
    return size.columns, size.lines


def run(args: argparse.Namespace) -> int:
    native = launch.native_module()
    pids = args.pid
    if args.exact:
        if len(pids) > 1 or args.subprocesses:
            raise CommandError("--exact traces one process: leave out --subprocesses and give one --pid", EXIT_USAGE)
        return run_exact(args, native, pids[0])
    process_set = native.ProcessSet(pids, args.rate, follow=bool(args.subprocesses))
    recording = Recording(rate_hz=args.rate)
    recording.subprocesses = bool(args.subprocesses)
    tracker = processes.ProcessTracker(recording, native.syscall_name, sys.stderr)
    tty_out = sys.stdout.isatty()
    with launch.StopSignals() as stop, Keys() as keys:
        total, finished = watch_processes(
            process_set,
            recording,
            tracker,
            args.duration,
            stop,
            sys.stdout,
            tty_out,
            args.sort,
            keys if tty_out else None,
            size=_terminal_size if tty_out else (lambda: (80, 24)),
        )
    if finished:
        if total == 0:
            raise CommandError(f"pid {', '.join(map(str, pids))} exited before anything was recorded", EXIT_TARGET_EXITED)
        print("gilty: every watched process exited", file=sys.stderr)
    return EXIT_OK


def run_exact(args: argparse.Namespace, native: Any, pid: int) -> int:
    """One process with exact (uprobe) figures beside the sampled ones."""
    args.pid = pid
    target = launch.attach(native, args.pid)
    base = Session(TargetInfo.from_native(target), args.rate)  # before Sampler takes the reader
    sampler = open_sampler(native, target, args.rate, args.exact)
    with launch.StopSignals() as stop:
        total, exited = watch(
            base, sampler, args.duration, stop, native.GiltyError, sys.stdout, sys.stdout.isatty(), native.syscall_name
        )
    if exited:
        if total == 0:
            raise CommandError(f"pid {args.pid} exited before anything was recorded", EXIT_TARGET_EXITED)
        print(f"gilty: pid {args.pid} exited", file=sys.stderr)
    return EXIT_OK
