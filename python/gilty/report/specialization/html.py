"""``gilty specialization --format html``: the specialization part of the shared HTML report
(``html_report``; drawn by ``html/specialization.js``): the verdict, the per-family table and, per hot
function, its source annotated line by line with each instruction's form — specialized, specialized
but missing, adaptive/backoff, warming, cold. The data goes into the page's JSON as
``specialization``; the page builds every node with ``textContent``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from gilty.specialization.analysis import Analysis, Site, analyse, nothing_ran_line
from gilty.specialization.session import ProcessWatch, SpecializationSession

# Source lines shown around a function's sites at most (a long function is cut to its hot part).
MAX_LINES = 80


def chip_class(s: Site) -> str:
    """The colour of an instruction: its form, or "missing" for a site specialized by name yet missing."""
    return "missing" if s.missing_while_specialized else s.form


def _source(watch: Optional[ProcessWatch], filename: str) -> tuple:
    """({line number: text}, why not shown), as the session kept them: no file is read here."""
    src = watch.source(filename) if watch else {}
    lines = {int(n): str(text) for n, text in (src.get("lines") or {}).items()}
    return lines, str(src.get("not_shown") or "")


def _site(s: Site) -> dict:
    return {
        "offset": s.offset,
        "name": s.name,
        "family": s.family,
        "form": s.form,
        "class": chip_class(s),
        "samples": s.samples,
        "slow": s.slow_path_estimate,
        "miss": s.miss_estimate,
        "counter": s.counter_meaning,
        "cause": s.cause,
    }


def _function(watch: Optional[ProcessWatch], pid: int, qualname: str, filename: str, sites: list) -> Optional[dict]:
    lines = sorted({s.line for s in sites if s.line})
    if not lines:
        return None
    hot = [s.line for s in sites if s.line and s.samples] or lines
    first = max(lines[0], min(hot) - MAX_LINES // 2)
    last = min(lines[-1], first + MAX_LINES - 1)
    by_line = defaultdict(list)
    for s in sorted(sites, key=lambda s: s.offset):
        by_line[s.line].append(s)
    src, not_shown = _source(watch, filename)
    return {
        "pid": pid,
        "qualname": qualname,
        "filename": filename,
        "source_not_shown": not_shown,
        "samples": sum(s.samples for s in sites),
        "lines": [
            {"no": n, "text": src.get(n, ""), "sites": [_site(s) for s in by_line.get(n, [])]} for n in range(first, last + 1)
        ],
    }


def report_data(session: SpecializationSession, top: int = 10, analysis: Analysis = None) -> dict:
    """The page data's ``specialization`` object (docs/json-format.md)."""
    a = analysis or analyse(session, top)
    by_code = defaultdict(list)
    for s in a.sites:
        by_code[(s.pid, s.qualname, s.filename)].append(s)
    hot = sorted(by_code.items(), key=lambda kv: (-sum(s.samples for s in kv[1]), kv[0][1]))[:top]
    watches = {w.pid: w for w in session.processes}
    functions = [f for (pid, q, fn), sites in hot if (f := _function(watches.get(pid), pid, q, fn, sites))]
    return {
        "kind": "specialization",
        "processes": [
            {
                "pid": w.pid,
                "python_version": w.python_version,
                "elapsed_s": w.raw["elapsed_s"],
                "running_samples": w.raw["running_samples"],
                "reads": w.raw["read_passes"],
                "codes": len(w.raw["codes"]),
            }
            for w in session.processes
        ],
        "skipped": {str(k): v for k, v in session.skipped.items()},
        "partial_reason": session.partial_reason,
        "verdict": a.verdict,
        "nothing_ran": nothing_ran_line(session) if a.nothing_ran else None,
        "generic_calls": a.generic_calls,
        "notes": a.notes,
        "families": [g.to_dict() for g in a.families],
        "functions": functions,
    }


def render(session: SpecializationSession, top: int = 10, analysis: Analysis = None) -> str:
    """The shared report with the specialization part. `gilty specialization` keeps no thread states
    or stacks, so the recording's sections stay empty (the page hides them)."""
    from gilty.report.recording import html as html_report
    from gilty.sampling.session import Recording

    recording = Recording(rate_hz=session.rate_hz)
    recording.duration_s = session.requested_duration_s
    recording.partial, recording.partial_reason = bool(session.partial_reason), session.partial_reason
    return html_report.render(recording, specialization=report_data(session, top, analysis))


def render_result(result) -> str:
    return render(result.session, result.top, result.analysis)
