"""The source lines a specialization report shows, read once from the live target when the run
ends (``sampling/source_files.py``: inside its root, as its user, regular files only) and kept in
the session, so that a saved report is rendered again without reading any file."""

from __future__ import annotations

from gilty.sampling.source_files import SourceFiles
from gilty.specialization.session import SpecializationSession

# Lines kept around each sampled line: more than the HTML page's window of a function (80 lines
# starting at most 40 before its first sampled line) needs.
AROUND_HOT = 80


def wanted_lines(code: dict) -> set:
    """The lines of one code object a report may show: its instructions' and those near its hot ones."""
    lines = sorted({ins["line"] for ins in code["instructions"] if ins.get("line")})
    if not lines:
        return set()
    anchors = [ins["line"] for ins in code["instructions"] if ins.get("line") and ins.get("samples")] or lines[:1]
    wanted = set(lines)
    for a in anchors:
        wanted.update(range(max(a - AROUND_HOT, lines[0]), min(a + AROUND_HOT, lines[-1]) + 1))
    return wanted


def read_sources(session: SpecializationSession) -> None:
    """Fill each process's ``raw["sources"]``: {file name: {"lines": {"N": text}, "not_shown": why}}."""
    for w in session.processes:
        files = SourceFiles(w.pid)
        sources: dict = {}
        for code in w.raw.get("codes", []):
            wanted = wanted_lines(code)
            if not wanted:
                continue
            entry = sources.setdefault(code["filename"], {"lines": {}, "not_shown": ""})
            got, reason = files.lines(code["filename"], min(wanted), max(wanted))
            entry["not_shown"] = reason
            entry["lines"].update((str(n), text) for n, text in got.items() if n in wanted)
        w.raw["sources"] = sources
