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
import tty
from contextlib import nullcontext
from typing import Any, Callable, Optional, TextIO

from gilty.cli.options import (
    DEFAULT_RATE_HZ,
    add_duration_argument,
    add_exact_argument,
    add_pid_arguments,
    add_rate_argument,
    top_options,
)
from gilty.report.labels import displayed, displayed_session, terminal_text
from gilty.report.recording import text_processes as console_processes
from gilty.report.recording.text import render_top
from gilty.sampling import capture, top_run

CLEAR_AND_HOME = "\x1b[2J\x1b[H"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_pid_arguments(parser, required=True)
    parser.add_argument(
        "--sort",
        choices=console_processes.SORT_KEYS,
        default="hold",
        help="order processes and threads by GIL held, GIL waited for, or CPU (default: %(default)s)",
    )
    add_rate_argument(parser, DEFAULT_RATE_HZ)
    add_duration_argument(parser)
    add_exact_argument(parser)


def run(args: argparse.Namespace) -> int:
    options = top_options(args)
    tty_out = sys.stdout.isatty()
    # Keys are read on a terminal, and only where the screen has its sort keys (not with --exact).
    with capture.Stop() as stop, nullcontext(None) if options.sampling.exact else Keys() as keys:
        screen = Screen(sys.stdout, tty_out, options.sort, keys if tty_out else None)
        return top_run.run(
            options, capture.stop_when(lambda: stop.requested, screen.quit), screen.one, screen.processes, screen.on_slice
        )


class Screen:
    """Where top's frames go: redrawn in place on a terminal (fitted to it; h / w / c sort, q quits),
    one block per frame otherwise."""

    def __init__(self, out: TextIO, tty_out: bool, sort: str = "hold", keys: Optional[Keys] = None) -> None:
        self.out, self.tty_out, self.sort, self.keys = out, tty_out, sort, keys
        self.quit_requested = False

    def quit(self) -> bool:
        return self.quit_requested

    def on_slice(self) -> None:
        if self.keys is None:
            return
        for ch in self.keys.pressed():
            if ch.lower() == "q":
                self.quit_requested = True
            new = console_processes.sort_key_for(ch)
            if new:
                self.sort = new

    def _write(self, frame: str) -> None:
        self.out.write(CLEAR_AND_HOME + frame if self.tty_out else frame + "\n")
        self.out.flush()

    def one(self, window, elapsed_s: float) -> None:
        self._write(terminal_text(render_top(displayed_session(window), elapsed_s)))

    def processes(self, recording, elapsed_s: float) -> None:
        width, height = _terminal_size() if self.tty_out else (80, 24)
        frame = console_processes.render_top(
            displayed(recording),
            elapsed_s,
            self.sort,
            width,
            height - 1 if self.tty_out else height,
            keys=self.keys is not None and self.keys.active,
        )
        self._write(terminal_text(frame))


def watch(
    base,
    sampler: Any,
    duration_s: Optional[float],
    stop: Any,
    native_error: type,
    out: TextIO,
    tty: bool,
    syscall_name=None,
    clock: Optional[Callable[[], float]] = None,
) -> tuple:
    """One process's frames to ``out`` (top_run.watch drawn by a Screen)."""
    extra = {} if clock is None else {"clock": clock}
    return top_run.watch(base, sampler, duration_s, stop, native_error, Screen(out, tty).one, syscall_name, **extra)


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


def _terminal_size() -> tuple:
    size = shutil.get_terminal_size((80, 24))
    return size.columns, size.lines
