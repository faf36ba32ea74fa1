"""The HTML report's source view: the hot functions' lines with their time by state
(``sampling/analysis/lines.py``), and their text where the recording kept it
(``sampling/recorded_sources.py``). Drawn by ``report/html/source.js``; docs/source-view.md."""

from __future__ import annotations

from typing import Optional

from gilty.sampling.analysis.lines import DEFAULT_FUNCTIONS, hot_functions, line_times, shown_states
from gilty.sampling.session import Recording

NO_FILE = "the code names no file (<string>, <frozen ...>, or an empty name)"
NOT_KEPT = "this recording kept no source lines (made by a command or version of gilty that did not read them)"


def _text_of(recording: Recording, file: str) -> tuple:
    """({line: text}, why not shown) from the first process whose recording kept the file."""
    reason = ""
    kept_any = False
    for session in recording.sessions:
        if not session.sources:
            continue
        kept_any = True
        entry = session.sources.get(file)
        if entry is None:
            continue
        if entry["lines"]:
            return {int(k): v for k, v in entry["lines"].items()}, ""
        reason = reason or entry["not_shown"] or NO_FILE
    if not kept_any:
        return {}, NOT_KEPT
    return {}, reason or "not read while the target ran (it became hot after its last look, or the target had exited)"


def view_data(recording: Recording, limit: int = DEFAULT_FUNCTIONS, idle: bool = False) -> Optional[dict]:
    """{"states_ranked": [...], "functions": [...]} for the page, or None without Python lines.

    Each function: name, file, its self and total samples per state, its hottest lines (self),
    ``lines`` as [line, text or None, self per state, total per state] in file order (a line
    number jump is a fold), and why its text is missing, if it is.
    """
    times = line_times(recording.sessions)
    hot = hot_functions(times, limit, idle)
    if not hot:
        return None
    states = shown_states(idle)
    functions = []
    for f in hot:
        text, reason = _text_of(recording, f.file)
        rows = []
        for n in f.shown_lines():
            t = f.lines.get(n)
            got = text.get(n)
            if t is None and got is None and text:
                continue  # past the file's end
            rows.append([n, got, t.self if t else None, t.total if t else None])
        # Context lines past the last sampled one that the file lacks are not shown.
        while rows and rows[-1][2] is None and rows[-1][1] is None:
            rows.pop()
        functions.append(
            {
                "function": f.function,
                "file": f.file,
                "self": f.self,
                "total": f.total,
                "hottest": f.hottest(states),
                "lines": rows,
                "not_shown": "" if text else reason,
            }
        )
    return {"states_ranked": list(states), "functions": functions}
