"""The JSON report of a recording (format documented key by key in docs/json-format.md)."""

from __future__ import annotations

import datetime
import json
from typing import Callable, Optional

from gilty.analysis import Summary, summarise
from gilty.analysis.syscalls import idle_kind
from gilty.session import IDLE, STATE_NAMES, Recording, Session

FORMAT_VERSION = 1


def _round(x: Optional[float]) -> Optional[float]:
    # Six decimals: exact enough for fractions of a million samples, short enough to read.
    return None if x is None else round(x, 6)


def _distribution(d: dict) -> dict:
    return {
        "count": d["count"],
        "p50_s": _round(d["p50_s"]),
        "p90_s": _round(d["p90_s"]),
        "p99_s": _round(d["p99_s"]),
        "max_s": _round(d["max_s"]),
        "log2_hist_ns": {str(lo): n for lo, n in sorted(d["log2_hist_ns"].items())},
    }


def _exact_thread(e) -> Optional[dict]:
    if e is None:
        return None
    return {
        "hold_s": _round(e.hold_s),
        "wait_s": _round(e.wait_s),
        "hold_fraction": _round(e.hold_fraction),
        "wait_fraction": _round(e.wait_fraction),
        "handoff_s": _round(e.handoff_s),
        "handoff_fraction": _round(e.handoff_fraction),
        "acquisitions": e.acquisitions,
        "forced_switches": e.forced_switches,
        "wait": _distribution(e.wait),
        "hold": _distribution(e.hold),
        "blame": [
            {
                "holder_tid": b.holder_tid,
                "holder_name": b.holder_name,
                "holder_function": b.holder_function,
                "holder_file": b.holder_file,
                "holder_line": b.holder_line,
                "wait_s": _round(b.wait_s),
            }
            for b in e.blame
        ],
    }


def _gc_exact(exact) -> Optional[dict]:
    if exact is None:
        return None
    return {
        "collections": [
            {
                "tid": c["tid"],
                "generation": c["generation"],
                "start_s": _round(c["start_s"]),
                "duration_s": _round(c["duration_s"]),
                "collected": c["collected"],
                "open": c["open"],
            }
            for c in exact.collections
        ],
        "by_generation": {
            g: dict(_distribution(d), total_s=_round(d["total_s"])) for g, d in exact.gc_by_generation.items()
        },
        "gc_s": _round(exact.gc_s),
        "gc_fraction": _round(exact.gc_fraction),
    }


def _exact_overhead(exact) -> Optional[dict]:
    if exact is None:
        return None
    return {
        "events": exact.events,
        "events_per_s": _round(exact.events_per_s),
        "lost": exact.lost,
        "wall_s": _round(exact.wall_s),
        "threads_attached": exact.threads_attached,
        "symbols": exact.symbols,
    }


def _thread(t, exact=None) -> dict:
    return {
        "tid": t.tid,
        "name": t.name,
        "samples": t.samples,
        "states": {name: _round(t.states.fraction(code)) for code, name in enumerate(STATE_NAMES)},
        "idle_syscalls": {name: _round(share) for name, share in t.idle_syscalls.items()},
        "idle_kinds": {kind: _round(share) for kind, share in t.idle_kinds.items()},
        "top_functions": [
            {
                "function": f.function,
                "file": f.file,
                "line": f.line,
                "fraction": _round(f.fraction),
                "state": f.state,
            }
            for f in t.top_functions
        ],
        "blame": [
            {
                "holder_tid": b.holder_tid,
                "holder_name": b.holder_name,
                "holder_function": b.holder_function,
                "holder_file": b.holder_file,
                "holder_line": b.holder_line,
                "fraction": _round(b.fraction),
            }
            for b in t.blame
        ],
        "convoy": {
            "episodes": t.convoy.episodes,
            "mean_wait_s": _round(t.convoy.mean_wait_s),
            "switch_intervals": _round(t.convoy.switch_intervals),
            "is_convoy": t.convoy.is_convoy,
            "total_wait_s": _round(t.convoy.total_wait_s),
            "resolution_limited": t.convoy.resolution_limited,
        },
        "exact": _exact_thread(exact.threads.get(t.tid)) if exact is not None else None,
    }


def report(session: Session, summary: Optional[Summary] = None, recording: Optional[Recording] = None) -> dict:
    """The report as a JSON-able dict.

    ``recording`` (default: this session alone) is embedded whole under "recording", so that
    `gilty report` can write every other format from the saved file without recording again.
    """
    summary = summary or summarise(session)
    target = session.target
    errors = session.errors
    return {
        "format_version": FORMAT_VERSION,
        "target": {
            "pid": target.pid,
            "python_version": target.python_version,
            "executable": target.executable,
        },
        "command": session.command,
        "start_time": datetime.datetime.fromtimestamp(session.start_time, datetime.timezone.utc).isoformat(),
        "duration_s": _round(session.duration_s),
        "requested_duration_s": session.requested_duration_s,
        "rate_hz": session.rate_hz,
        "samples": session.samples,
        "errors": {key: int(errors[key]) for key in ("torn_retried", "torn_dropped", "read_failed", "late")},
        "partial": session.partial,
        "partial_reason": session.partial_reason,
        "stopped_by": session.stopped_by,
        "gil_utilisation": _round(summary.gil_utilisation),
        "gc_share": _round(summary.gc_share),
        "mean_waiting_threads": _round(summary.mean_waiting_threads),
        "switch_interval_s": target.switch_interval_s,
        "verdict": summary.verdict.text if summary.verdict else "",
        "verdict_kinds": list(summary.verdict.kinds) if summary.verdict else [],
        "threads": [_thread(t, summary.exact) for t in summary.threads],
        "gc_exact": _gc_exact(summary.exact),
        "exact_overhead": _exact_overhead(summary.exact),
        "recording": (recording or Recording.of(session)).to_dict(),
    }


def render(session: Session, summary: Optional[Summary] = None, recording: Optional[Recording] = None) -> str:
    data = report(session, summary, recording)
    # The analysed part is indented for people; the raw recording (one number per sample) is
    # written compactly on one line, else it would be most of the file's lines.
    raw = data.pop("recording")
    text = json.dumps(data, indent=2)
    return text[:-2] + ',\n  "recording": ' + json.dumps(raw) + "\n}\n"


def dump_report(target_info: dict, snapshot: dict, syscall_name: Callable[[int], str]) -> dict:
    """The JSON form of one `gilty dump` snapshot."""
    threads = []
    for thread in snapshot["threads"]:
        state = thread["state"]
        syscall = thread.get("syscall", -1)
        name = syscall_name(syscall) if syscall >= 0 else None
        threads.append(
            {
                "tid": thread["tid"],
                "name": thread["name"],
                "state": STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else "unknown",
                "syscall": name,
                "idle_kind": idle_kind(name) if name is not None and state == IDLE else None,
                "stack": [{"function": f, "file": file, "line": line} for f, file, line in thread["stack"]],
            }
        )
    return {"format_version": FORMAT_VERSION, "target": target_info, "threads": threads}


def render_dump(target_info: dict, snapshot: dict, syscall_name: Callable[[int], str]) -> str:
    return json.dumps(dump_report(target_info, snapshot, syscall_name), indent=2) + "\n"
