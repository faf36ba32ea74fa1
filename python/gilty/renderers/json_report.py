"""The JSON report of a recording (format documented key by key in docs/json-format.md)."""

from __future__ import annotations

import datetime
import json
from typing import Callable, Optional

from gilty.analysis import Summary, summarise
from gilty.analysis.syscalls import idle_kind
from gilty.session import IDLE, STATE_NAMES, Session

FORMAT_VERSION = 1


def _round(x: Optional[float]) -> Optional[float]:
    # Six decimals: exact enough for fractions of a million samples, short enough to read.
    return None if x is None else round(x, 6)


def _thread(t) -> dict:
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
    }


def report(session: Session, summary: Optional[Summary] = None) -> dict:
    """The report as a JSON-able dict."""
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
        "threads": [_thread(t) for t in summary.threads],
    }


def render(session: Session, summary: Optional[Summary] = None) -> str:
    return json.dumps(report(session, summary), indent=2) + "\n"


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
