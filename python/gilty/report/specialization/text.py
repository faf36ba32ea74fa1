"""``gilty specialization`` as console text: verdict, costliest sites, per function, per family."""

from __future__ import annotations

import os

from gilty.report.labels import visible
from gilty.specialization.analysis import Analysis, Group, Site, analyse, nothing_ran_line
from gilty.specialization.session import SpecializationSession


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def _site_row(s: Site) -> str:
    where = f"{visible(os.path.basename(s.filename))}:{s.line}"
    name = f"{s.name[:25]} (callee)" if s.is_call else s.name[:34]
    return (
        f"  {where:<28} {visible(s.qualname, 28):<28} {name:<34} {s.form:<11} {s.share:>6.1%} "
        f"{_pct(s.slow_path_estimate):>5} {s.counter_meaning}"
    )


def _group_rows(groups: list, limit: int) -> list:
    lines = [f"  {'':<44} {'sites':>5} {'samples':>8} {'spec.':>6} {'slow':>5} {'missing':>7} {'backoff':>7} {'cold':>5}"]
    for g in groups[:limit]:
        g: Group
        lines.append(
            f"  {visible(g.key, 44):<44} {g.sites:>5} {g.samples:>8} {_pct(g.specialized_share):>6} {_pct(g.slow_share):>5} "
            f"{g.missing:>7} {g.backoff:>7} {g.cold:>5}"
        )
    return lines


def _cut_names(lines: list, sites: list) -> list:
    """Verdict and call lines quote names and source the target chose (a generated 4 kB function
    name): each is escaped and cut there as in the tables."""
    shown = {}
    for s in sites:
        for name in (s.qualname, os.path.basename(s.filename), s.source):
            if name and name not in shown and visible(name) != name:
                shown[name] = visible(name)
    for name in sorted(shown, key=len, reverse=True):
        lines = [line.replace(name, shown[name]) for line in lines]
    return lines


def render(session: SpecializationSession, top: int = 10, analysis: Analysis = None) -> str:
    a = analysis or analyse(session, top)
    out = []
    for w in session.processes:
        r = w.raw
        out.append(
            f"gilty specialization: pid {w.pid}, Python {w.python_version}, {r['elapsed_s']:.1f} s, "
            f"{r['running_samples']} samples running Python (of {r['thread_samples']} thread samples), "
            f"{len(r['codes'])} hot code objects read {r['read_passes']} times"
        )
    for pid, why in sorted(session.skipped.items()):
        out.append(f"skipped pid {pid}: {why}")
    if session.partial_reason:
        out.append(f"PARTIAL: {session.partial_reason}")
    out.append("")
    out.append("Verdict: (sites ranked by the time spent in the instruction itself while its thread ran Python)")
    if a.nothing_ran:
        out.append(f"  {nothing_ran_line(session)}")
    elif a.verdict:
        out += [f"  {i}. {v}" for i, v in enumerate(_cut_names(a.verdict, a.sites), 1)]
    else:
        out.append("  the hot sites stay specialized: no site was seen running the generic path or missing")
    if a.generic_calls:
        out.append("")
        out.append("Calls on the generic path, not ranked: their time is the called C function's own work;")
        out.append("specializing a call saves only the call's overhead:")
        out += [f"  - {c}" for c in _cut_names(a.generic_calls, a.sites)]
    out.append("")
    out.append(
        f"Hot sites (top {top} by time; slow = estimated share of executions on the generic path or missing; "
        "a call's time is its callee's):"
    )
    out.append(f"  {'where':<28} {'function':<28} {'instruction':<34} {'form':<11} {'time':>6} {'slow':>5} counter")
    by_time = sorted(a.sites, key=lambda s: (-s.samples, s.qualname, s.offset))
    out += [_site_row(s) for s in by_time[:top] if s.samples]
    out.append("")
    out.append("Per function (spec. = share of its site time on specialized instructions):")
    out += _group_rows(a.functions, top)
    out.append("")
    out.append("Per family:")
    out += _group_rows(a.families, 50)
    if a.notes:
        out.append("")
        out += [f"note: {n}" for n in _cut_names(a.notes, a.sites)]
    return "\n".join(out) + "\n"


def render_opcache(doc: dict, top: int = 10) -> str:
    """Python 3.10: per hot code object, whether it has an opcache and each site's entry state."""
    out = [f"gilty specialization: pid {doc['pid']}, Python {doc['python_version']} (opcache), {doc['samples']} samples", ""]
    codes = [c for c in doc["codes"] if c["sites"]][:top]
    if not codes:
        out.append("no sampled code object has a LOAD_GLOBAL, LOAD_ATTR or LOAD_METHOD site")
    for c in codes:
        where = f"{visible(os.path.basename(c['filename']))}:{c['firstlineno']}"
        if c["has_opcache"]:
            head = f"opcache with {c['entries']} entries"
        else:
            head = f"no opcache yet ({c['opcache_flag']} calls counted; CPython creates it at 1024)"
        out.append(f"{visible(c['qualname'])} ({where}), {c['samples']} samples: {head}")
        for s in c["sites"]:
            state = s["state"] + (f" (tolerates {s['misses_tolerated']} more misses)" if s["misses_tolerated"] else "")
            out.append(f"  line {s['line']:<5} {s['name']:<12} {state}")
    deopt = sum(1 for c in codes for s in c["sites"] if s["state"] == "deoptimized")
    out.append("")
    out.append(f"{deopt} site(s) deoptimized (their lookups take the generic path: several types, or a changing dict)")
    return "\n".join(out) + "\n"


def render_result(result) -> str:
    return render(result.session, result.top, result.analysis)


def render_opcache_result(result) -> str:
    return render_opcache(result.doc, result.top)
