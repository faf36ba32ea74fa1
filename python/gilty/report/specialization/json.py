"""``gilty specialization --format json``: the analysis plus the raw session (docs/json-format.md)."""

from __future__ import annotations

import json

from gilty.specialization.analysis import Analysis, analyse
from gilty.specialization.session import SpecializationSession


def render(session: SpecializationSession, top: int = 10, analysis: Analysis = None) -> str:
    a = analysis or analyse(session, top)
    doc = {
        "schema": "gilty.specialization.report/1",
        "verdict": a.verdict,
        "nothing_ran": a.nothing_ran,
        "generic_calls": a.generic_calls,
        "notes": a.notes,
        "sites": [s.to_dict() for s in a.sites],
        "functions": [g.to_dict() for g in a.functions],
        "families": [g.to_dict() for g in a.families],
        "session": session.to_dict(),
    }
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def render_result(result) -> str:
    return render(result.session, result.top, result.analysis)


def render_opcache_result(result) -> str:
    return json.dumps({"schema": "gilty.specialization.opcache/1", **result.doc}, indent=1) + "\n"
