"""`gilty top`'s live screen: each frame redrawn in place on a terminal (fitted to it), one block per
frame otherwise, and the keys typed meanwhile (h / w / c sort, q quits)."""

from __future__ import annotations

import os
import select
import shutil
import sys
import termios
import tty
from typing import Any, Optional, TextIO

from gilty.report.labels import displayed, displayed_session, terminal_text
from gilty.report.recording import text_processes as console_processes
from gilty.report.recording.text import render_top

CLEAR_AND_HOME = "\x1b[2J\x1b[H"


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
