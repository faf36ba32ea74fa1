"""``gilty memory --format html``: the shared HTML report (report/recording/html.py) with a memory part,
drawn by report/html/memory.js from one key of the page's JSON.

The part's figures are those of the other memory formats, not recomputed: the JSON report itself
(``report``, what ``--format json`` writes, each process's samples cut to the last one), the text
report's first line and whole text, and the GC / outside split with its caveat (memory.analysis).
With --faults, the collapsed stacks of the JSON report are drawn as a flame graph by the page's JS,
with textContent, so function names from the target are never parsed as markup.
"""

from __future__ import annotations

from gilty.memory import analysis
from gilty.memory.session import MemorySession
from gilty.report.memory import json as memory_json
from gilty.report.memory import text
from gilty.report.recording import html as html_report
from gilty.sampling.session import Recording

# The page has no recording; its rate only labels an empty header, which memory.js replaces.
RATE_HZ = 100.0


def page_part(session: MemorySession) -> dict:
    """The page JSON's ``memory`` key."""
    report = memory_json.report(session)
    for proc in report["processes"]:
        # The table shows each process's last measurement; a long run's every sample would be most of the page.
        proc["samples_measured"] = len(proc["samples"])
        proc["samples"] = proc["samples"][-1:]
    return {
        "headline": text.headline(session),
        "helpers": [f"helper {rec.pid}, not a worker: {rec.helper}" for rec in session.helpers],
        "split": analysis.gc_split(session),
        "report": report,
        "text": text.render(session),
    }


def render(session: MemorySession) -> str:
    return html_report.render(Recording(rate_hz=RATE_HZ), memory=page_part(session))
