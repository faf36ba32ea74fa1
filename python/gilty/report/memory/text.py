"""The text report of ``gilty memory``."""

from __future__ import annotations

import textwrap

from gilty.memory import analysis, faults
from gilty.memory.analysis import mib
from gilty.memory.session import MemorySession, ProcessRecord
from gilty.memory.since_fork import since_fork_of

WIDTH = 100


def _m(n) -> str:
    return "-" if n is None else f"{mib(n):.1f}"


def _label(rec: ProcessRecord) -> str:
    text = f"{rec.role:<6} {rec.pid}"
    if rec.exited is not None:
        text += f" (exited {rec.exited:.1f}s)"
    return text


def _memory_table(session: MemorySession) -> list:
    head = f"{'MiB (growth: this run)':<26}{'RSS':>8}{'PSS':>8}{'USS':>8}{'shared':>8}{'growth':>9}{'CoW in GC':>11}{'outside GC':>12}"
    lines = [head]
    for rec in session.ordered():
        if not rec.samples:
            lines.append(f"{_label(rec):<26}  (not measured)")
            continue
        s = rec.samples[-1]
        cow = analysis.cow_of(rec, session.faults)
        tracked = cow["baseline_shared_bytes"] is not None
        lines.append(
            f"{_label(rec):<26}{_m(s['rss']):>8}{_m(s['pss']):>8}{_m(s['uss']):>8}"
            f"{_m(s['shared_clean'] + s['shared_dirty']):>8}{mib(cow['private_growth_bytes']):>+9.1f}"
            f"{_m(cow['during_gc_bytes'] if tracked else None):>11}{_m(cow['outside_gc_bytes'] if tracked else None):>12}"
        )
    timeline = analysis.tree_timeline(session)
    if timeline:
        first, last = timeline[0], timeline[-1]
        lines.append(
            f"{'tree (now)':<26}{_m(last['rss']):>8}{_m(last['pss']):>8}{_m(last['uss']):>8}"
            f"{'':>8}{mib(last['uss'] - first['uss']):>+9.1f}"
        )
    return lines


def _since_fork_table(session: MemorySession) -> list:
    """Per worker, its pages against the master's since fork (the growth column counts only the recording)."""
    rows = [(rec, since_fork_of(rec)) for rec in session.workers]
    rows = [(rec, f) for rec, f in rows if f]
    if not rows:
        return []
    lines = [f"{'since fork, MiB':<26}{'shared w/ master':>17}{'copied':>9}{'new':>9}{'private':>9}"]
    for rec, f in rows:
        lines.append(
            f"{_label(rec):<26}{_m(f['shared_with_parent_bytes']):>17}{_m(f['copied_bytes']):>9}"
            f"{_m(f['new_bytes']):>9}{_m(f['private_bytes']):>9}"
        )
    return lines


def _gc_table(session: MemorySession) -> list:
    lines = [f"{'GC':<26}{'auto':>6}{'thresholds':>14}{'frozen':>11}{'collections':>14}{'seen':>7}{'GC time':>10}{'longest':>10}"]
    for rec in session.ordered():
        g = analysis.gc_of(rec)
        if g is None:
            lines.append(f"{_label(rec):<26}  {rec.gc_note or 'not a Python process'}")
            continue
        auto = "on" if g["enabled"] and g["thresholds"][0] else ("off" if not g["enabled"] else "thr 0")
        frozen = "-" if g["frozen"] is None else f"{g['frozen']:,}{'' if g['frozen_exact'] else '+'}"
        col = "-" if g["collections_during_run"] is None else "/".join(map(str, g["collections_during_run"]))
        lines.append(
            f"{_label(rec):<26}{auto:>6}{'/'.join(map(str, g['thresholds'])):>14}{frozen:>11}{col:>14}"
            f"{g['windows']:>7}{g['gc_time_s'] * 1e3:>8.0f}ms{g['longest_pause_s'] * 1e3:>8.0f}ms"
        )
    return lines


def _wrap(text: str, first: str, rest: str) -> list:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest) or [first]


def _method(session: MemorySession) -> list:
    stats = session.stats or {}
    poll = stats.get("gc_poll", {})
    missed = 0
    for rec in session.processes.values():
        g = analysis.gc_of(rec)
        if g and g["missed_collections"]:
            missed += sum(g["missed_collections"])
    ambiguous = sum(analysis.cow_of(r, session.faults)["ambiguous_bytes"] for r in session.processes.values())
    method = session.cow_method() or "none (pagemap unreadable)"
    text = (
        f"GC windows: the `collecting` flag of each Python process polled every {session.gc_poll_s * 1e3:g} ms "
        f"(not uprobes); {missed} collection(s) were shorter than a poll and not seen (those are young-generation "
        f"collections, which copy little). Copy-on-write: {method} (/proc/PID/pagemap) for the pages each process "
        f"shared when first measured, rescanned every {session.interval_s:g} s and when a collection starts or ends; "
        f"{mib(ambiguous):.1f} MiB were attributed by estimate (see docs/memory.md)."
    )
    if any(analysis.cow_of(w, session.faults)["gc_split_by"] == "page faults" for w in session.workers):
        text += " The workers' copies are split between GC and outside it as their sampled page faults were (--faults)."
    elapsed = stats.get("elapsed_s") or session.duration_s or 0
    cpu = (stats.get("measuring_cpu_s") or 0) + (poll.get("cpu_s") or 0)
    per_proc = [analysis.cost_of(r) for r in session.ordered() if r.samples]
    smaps = max((c["smaps_mean_s"] for c in per_proc), default=0.0)
    pagemap = max((c["pagemap_mean_s"] for c in per_proc), default=0.0)
    per_pass = sum(c["per_pass_mean_s"] for c in per_proc)
    cost = (
        f"Measurement cost: {per_pass * 1e3:.1f} ms per pass for the whole tree (per process at most "
        f"{smaps * 1e3:.1f} ms smaps_rollup + {pagemap * 1e3:.1f} ms pagemap); gilty used "
        f"{(cpu / elapsed * 100) if elapsed else 0:.1f}% of one CPU ({poll.get('passes', 0)} GC polls, "
        f"{stats.get('trigger_scans', 0)} GC-triggered scans, {stats.get('trigger_scans_skipped', 0)} skipped for budget)."
    )
    return _wrap(text, "  ", "  ") + _wrap(cost, "  ", "  ")


def fault_table(raw) -> list:
    """--faults: the functions whose writes copied shared pages, and how the figures were got."""
    s = faults.summary(raw)
    if s is None:
        return []
    lines = ["", f"Who copied shared pages (sampled page faults, every {s['period']}; {_m(s['copied_bytes'])} MiB copied):"]
    if not s["functions"]:
        lines.append("  no sampled fault copied a page shared with the master")
    else:
        lines.append(f"  {'MiB':>7} {'share':>6} {'in GC':>6}  function (file:line) <- C function that wrote")
        for f in s["functions"]:
            where = f"{f['function']} ({f['file'].rsplit('/', 1)[-1]})" if f["file"] else f["function"]
            c = ", ".join(x["name"] for x in f["c_functions"][:2])
            gc = f"{f['gc_bytes'] / f['bytes']:.0%}" if f["bytes"] else "-"
            lines.append(f"  {_m(f['bytes']):>7} {f['share']:>6.1%} {gc:>6}  {where} <- {c}")
    j, c = s["join"], s["cost"]
    lines.extend(
        _wrap(
            f"{s['copied_samples']} of {s['samples']} sampled faults copied a shared page ({s['method']}); "
            f"{s['lost_records']} records lost; stacks read every 0.25 ms, the joined read "
            f"{j['lag_p50_s'] * 1e6:.0f} us from its fault (median), {j['lag_p99_s'] * 1e6:.0f} us (p99); "
            f"{c['samples_per_s']:.0f} faults sampled per second; reader CPU {c['reader_cpu_share']:.0%} of one core.",
            "  ",
            "  ",
        )
    )
    return lines


def headline(session: MemorySession) -> str:
    """The report's first line: the master, its workers and helpers, how long and how often."""
    master = session.master
    what = master.cmdline if master and master.cmdline else "?"
    py = f", Python {master.python}" if master and master.python else ""
    n = len(session.workers)
    h = len(session.helpers)
    helpers = f", {h} helper{'s' * (h != 1)}" if h else ""
    return (
        f"gilty memory: master pid {session.master_pid} ({what[:60]}){py}; {n} worker{'s' * (n != 1)}{helpers}; "
        f"{session.duration_s:.1f} s, every {session.interval_s:g} s"
    )


def render(session: MemorySession) -> str:
    lines = []
    if session.partial:
        lines.append(f"PARTIAL: {session.partial_reason}")
    lines.append(headline(session))
    for rec in session.helpers:
        lines.extend(_wrap(f"helper {rec.pid}, not a worker: {rec.helper}", "  ", "    "))
    lines.append("")
    lines.extend(_memory_table(session))
    since = _since_fork_table(session)
    if since:
        lines.append("")
        lines.extend(since)
    lines.append("")
    lines.extend(_gc_table(session))
    warns = analysis.warnings(session)
    if warns:
        lines.append("")
        lines.append("Warnings:")
        for w in warns:
            lines.extend(_wrap(w["message"], "  ! ", "    "))
    lines.extend(fault_table(session.faults))
    lines.append("")
    lines.append("Summary:")
    for sentence in analysis.summary(session):
        lines.extend(_wrap(sentence, "  ", "  "))
    lines.append("")
    lines.append("Method:")
    lines.extend(_method(session))
    for note in session.notes:
        lines.extend(_wrap(note, "  note: ", "    "))
    if session.partial:
        lines.append(f"PARTIAL: {session.partial_reason}")
    return "\n".join(lines) + "\n"
