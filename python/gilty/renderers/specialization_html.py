"""``gilty specialization --format html``: one self-contained page (no script, no external asset) with the
verdict and, per hot function, its source annotated line by line with each instruction's form:
specialized (green), specialized but missing (orange), backoff / generic (red), warming (yellow), cold
(grey). Every text from the target (names, paths, source) is escaped."""

from __future__ import annotations

import html
import linecache
import os
from collections import defaultdict

from gilty.specialization.analysis import Analysis, Site, analyse
from gilty.specialization.session import SpecializationSession

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; } td, th { padding: 1px 8px; vertical-align: top; }
.src td.code { font-family: ui-monospace, monospace; white-space: pre; }
.src td.no { color: #999; text-align: right; font-family: ui-monospace, monospace; }
.ins { display: inline-block; margin: 0 3px 1px 0; padding: 0 4px; border-radius: 3px; font-size: 12px; }
.specialized { background: #c8ebc8; } .missing { background: #ffd29a; } .backoff, .generic { background: #f6b3b3; }
.warming { background: #fff1a8; } .cold, .instrumented { background: #e3e3e3; color: #666; }
.legend span { margin-right: 8px; }
"""


def _class(s: Site) -> str:
    return "missing" if s.missing_while_specialized else s.form


def _chip(s: Site) -> str:
    slow = "" if s.slow_path_estimate is None else f", slow ~{s.slow_path_estimate:.0%}"
    title = f"{s.name} ({s.form}{slow}); {s.counter_meaning}" + (f"; likely cause: {s.cause}" if s.cause else "")
    return (f'<span class="ins {_class(s)}" title="{html.escape(title)}">{html.escape(s.name)} '
            f"{s.samples}</span>")


def _source(filename: str, first: int, last: int, pid: int) -> dict:
    for path in (filename, f"/proc/{pid}/root{filename}"):
        if os.path.exists(path):
            return {n: linecache.getline(path, n).rstrip("\n") for n in range(first, last + 1)}
    return {}


def render(session: SpecializationSession, top: int = 10, analysis: Analysis = None) -> str:
    a = analysis or analyse(session, top)
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>gilty specialization</title>", f"<style>{CSS}</style></head><body>",
           "<h1>gilty specialization</h1>"]
    for w in session.processes:
        r = w.raw
        out.append(f"<p>pid {w.pid}, Python {e(w.python_version)}, {r['elapsed_s']:.1f} s, "
                   f"{r['running_samples']} running samples, {len(r['codes'])} hot code objects</p>")
    if session.partial_reason:
        out.append(f"<p><b>PARTIAL:</b> {e(session.partial_reason)}</p>")
    out.append("<h2>Verdict</h2>")
    out.append("<ol>" + "".join(f"<li>{e(v)}</li>" for v in a.verdict) + "</ol>" if a.verdict
               else "<p>The hot sites stay specialized.</p>")
    out.append('<p class="legend">' + "".join(f'<span class="ins {c}">{c}</span>' for c in
               ("specialized", "missing", "backoff", "warming", "cold")) + " (number: samples on the instruction)</p>")
    by_code = defaultdict(list)
    for s in a.sites:
        by_code[(s.pid, s.qualname, s.filename)].append(s)
    hot = sorted(by_code.items(), key=lambda kv: -sum(s.samples for s in kv[1]))[:top]
    for (pid, qualname, filename), sites in hot:
        lines = [s.line for s in sites if s.line]
        if not lines:
            continue
        out.append(f"<h2>{e(qualname)} <small>{e(filename)} (pid {pid})</small></h2>")
        by_line = defaultdict(list)
        for s in sorted(sites, key=lambda s: s.offset):
            by_line[s.line].append(s)
        src = _source(filename, min(lines), max(lines), pid)
        out.append('<table class="src">')
        for n in range(min(lines), max(lines) + 1):
            chips = "".join(_chip(s) for s in by_line.get(n, []))
            out.append(f'<tr><td class="no">{n}</td><td class="code">{e(src.get(n, ""))}</td><td>{chips}</td></tr>')
        out.append("</table>")
    if a.notes:
        out.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in a.notes) + "</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
