"""The source lines a recording keeps for the HTML report's source view (docs/source-view.md).

Files are read from the live target only, through ``sampling/source_files.py`` (inside its root,
as its user, regular files only, bounded): never by opening a code object's file name here. A
`-- CMD` recording usually ends with its target's exit, so the files of the functions that matter
are read while it runs: a little after the start, then less and less often (each file once), and
once more at the end if the target is still there. Only the lines the view shows are kept in the
session (``Session.sources``), so a saved recording renders again without reading any file.
"""

from __future__ import annotations

import time
from typing import Callable

from gilty.sampling.analysis.lines import DEFAULT_FUNCTIONS, hot_functions, line_times
from gilty.sampling.session import Session
from gilty.sampling.source_files import SourceFiles

# Seconds after the start at which the hot functions' files are looked at; then every LATER_EVERY_S.
# Ranking walks the recording's stack counts: rare enough to cost nothing next to sampling.
FIRST_LOOKS_S = (0.5, 2.0, 5.0)
LATER_EVERY_S = 15.0
# A few more functions than the page shows, so that the end's ranking finds its files read.
SPARE = 2


class SourceKeeper:
    """Reads the files of one session's hot functions while the target lives; ``finish`` stores
    the shown lines in ``session.sources``."""

    def __init__(self, session: Session, functions: int = DEFAULT_FUNCTIONS, clock: Callable[[], float] = time.monotonic) -> None:
        self.session = session
        self.functions = functions
        self.clock = clock
        self.started = clock()
        self.files = SourceFiles(session.target.pid)
        self._looks = 0

    def poll(self) -> None:
        """Called after every slice: reads new hot files when a look is due."""
        elapsed = self.clock() - self.started
        due = FIRST_LOOKS_S[self._looks] if self._looks < len(FIRST_LOOKS_S) else None
        if due is None:
            due = FIRST_LOOKS_S[-1] + LATER_EVERY_S * (self._looks - len(FIRST_LOOKS_S) + 1)
        if elapsed < due:
            return
        self._looks += 1
        self._read_hot()

    def _read_hot(self) -> list:
        hot = hot_functions(line_times([self.session]), self.functions * SPARE)
        for f in hot:
            self.files.lines(f.file, 1, 0)  # reads (or refuses) the whole file once; kept in self.files
        return hot

    def finish(self) -> None:
        """The end: files of functions that became hot since the last look (if the target is still
        there), then only the lines the view shows, into ``session.sources``."""
        sources: dict = {}
        for f in self._read_hot():
            shown = f.shown_lines()
            if not shown:
                continue
            entry = sources.setdefault(f.file, {"lines": {}, "not_shown": ""})
            got, reason = self.files.lines(f.file, shown[0], shown[-1])
            entry["not_shown"] = reason
            wanted = set(shown)
            entry["lines"].update((str(n), text) for n, text in got.items() if n in wanted)
        self.session.sources = sources
