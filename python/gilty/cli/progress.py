"""A one-line progress indicator for long recordings, on a terminal only.

`gilty record` without --duration can run for hours; one line on stderr, rewritten in place about
once a second, shows that it is still sampling and what it has seen. When stderr is not a terminal
(a log file, a pipe, CI) nothing is written: the line would be noise there.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, TextIO

UPDATE_EVERY_S = 1.0


def _clock_text(seconds: float) -> str:
    """3723.4 -> '1:02:03'."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """Call ``update`` from the sampling loop as often as convenient and ``clear`` at the end."""

    def __init__(
        self,
        stream: TextIO,
        enabled: Optional[bool] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self.clock = clock
        self.started = clock()
        self._last_shown: Optional[float] = None
        self._width = 0  # of the line on screen, so that a shorter one or clear() blanks it all

    def update(self, samples: int, threads: int, processes: int = 1) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if self._last_shown is not None and now - self._last_shown < UPDATE_EVERY_S:
            return
        self._last_shown = now
        plural = "" if processes == 1 else "es"
        line = (
            f"gilty: recording {_clock_text(now - self.started)}, {samples:,} samples, "
            f"{processes} process{plural}, {threads} thread{'' if threads == 1 else 's'} (Ctrl-C to stop)"
        )
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def clear(self) -> None:
        """Blank the line, so that what is printed next starts on a clean line."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
