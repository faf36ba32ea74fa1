"""The JSON report of ``gilty memory`` (documented key by key in docs/memory.md). Sizes are bytes."""

from __future__ import annotations

import json

from gilty.memory import analysis, faults
from gilty.memory.session import SAMPLE_FIELDS, MemorySession, ProcessRecord
from gilty.memory.since_fork import preload, since_fork_of

FORMAT_VERSION = 1
# Keys of each entry of processes[].samples, in order: the time, then the measured fields.
SAMPLE_KEYS = ("t",) + SAMPLE_FIELDS


def _round(x, digits: int = 6):
    return None if x is None else round(x, digits)


def _sample(s: dict) -> dict:
    out = {k: s[k] for k in SAMPLE_KEYS}
    out["t"] = _round(s["t"])
    return out


def _process(rec: ProcessRecord, faults) -> dict:
    cost = analysis.cost_of(rec)
    return {
        "pid": rec.pid,
        "ppid": rec.ppid,
        "role": rec.role,
        "helper": rec.helper,
        "cmdline": rec.cmdline,
        "python": rec.python,
        "first_seen_s": _round(rec.first_seen),
        "exited_s": _round(rec.exited),
        "samples": [_sample(s) for s in rec.samples],
        "cow": analysis.cow_of(rec, faults),
        "since_fork": since_fork_of(rec),
        "gc": _gc(rec),
        "gc_note": rec.gc_note,
        "cost": {k: (_round(v, 7) if isinstance(v, float) else v) for k, v in cost.items()},
    }


def _gc(rec: ProcessRecord):
    g = analysis.gc_of(rec)
    if g is None:
        return None
    g["gc_time_s"] = _round(g["gc_time_s"])
    g["longest_pause_s"] = _round(g["longest_pause_s"])
    g["pauses"] = [
        {"start_s": _round(w["start"]), "duration_s": _round(w["end"] - w["start"]), "generation": w["generation"]}
        for w in rec.gc_windows
    ]
    for c in g["changes"]:
        c["t"] = _round(c["t"])
    return g


def report(session: MemorySession) -> dict:
    stats = session.stats or {}
    poll = stats.get("gc_poll", {})
    elapsed = stats.get("elapsed_s") or session.duration_s or 0.0
    return {
        "format_version": FORMAT_VERSION,
        "kind": "memory",
        "master_pid": session.master_pid,
        "start_time": session.start_time,
        "duration_s": _round(session.duration_s),
        "requested_duration_s": session.requested_duration_s,
        "interval_s": session.interval_s,
        "partial": session.partial,
        "partial_reason": session.partial_reason,
        "master_exited_s": _round(session.master_exited),
        "method": {
            "gc_windows": "poll",
            "gc_poll_interval_s": session.gc_poll_s,
            "cow": session.cow_method(),
        },
        "processes": [_process(p, session.faults) for p in session.ordered()],
        "tree": [
            {"t": _round(t["t"]), "rss": t["rss"], "pss": t["pss"], "uss": t["uss"], "processes": t["processes"]}
            for t in analysis.tree_timeline(session)
        ],
        "savings": analysis.savings(session),
        "preload": preload(session),
        "warnings": analysis.warnings(session),
        "summary": analysis.summary(session),
        "cost": {
            "passes": stats.get("passes", 0),
            "measuring_cpu_s": _round(stats.get("measuring_cpu_s")),
            "gc_poll_cpu_s": _round(poll.get("cpu_s")),
            "cpu_share": _round(((stats.get("measuring_cpu_s") or 0) + (poll.get("cpu_s") or 0)) / elapsed if elapsed else 0.0),
            "gc_poll_passes": poll.get("passes", 0),
            "gc_poll_max_gap_s": _round(poll.get("max_gap_s")),
            "gc_poll_late_passes": poll.get("late_passes", 0),
            "gc_triggered_scans": stats.get("trigger_scans", 0),
            "gc_triggered_scans_skipped": stats.get("trigger_scans_skipped", 0),
            "tree_scans": stats.get("tree_scans", 0),
            "tree_scan_s": _round(stats.get("tree_scan_s")),
        },
        "faults": faults.summary(session.faults),
        "notes": list(session.notes),
    }


def render(session: MemorySession) -> str:
    return json.dumps(report(session), indent=2) + "\n"
