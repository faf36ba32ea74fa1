"""The JSON report of a recording (format documented key by key in docs/json-format.md)."""

from __future__ import annotations

import copy
import datetime
import json
from typing import Optional

from gilty.report.dump import json as dump
from gilty.report.recording import readiness
from gilty.report.recording import tasks as task_view
from gilty.sampling import event_loops
from gilty.sampling.analysis import Summary, summarise
from gilty.sampling.native_frames import is_native, native_offset, native_parts
from gilty.sampling.processes import roles
from gilty.sampling.session import ERROR_KEYS, GIL_FLAG_KEYS, NATIVE_ERROR_KEYS, STATE_NAMES, Recording, Session

# Shared with gilty dump's JSON (defined there so that `gilty dump` imports nothing heavy).
FORMAT_VERSION = dump.FORMAT_VERSION
dump_report = dump.dump_report


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


def _native_keys(prefix: str, file, line) -> dict:
    """Whether a frame is a C frame of `record --native` (`native_frames`), its offset in its library
    (``file``), and its source file and line where the library has line tables; null for a Python
    frame."""
    native = is_native(line)
    _, source, source_line = native_parts(file) if native else (None, None, None)
    return {
        f"{prefix}native": native,
        f"{prefix}offset": native_offset(line) if native else None,
        f"{prefix}source_file": source,
        f"{prefix}source_line": source_line,
    }


def _frame_file(file, line):
    """A frame's ``file``: a C frame's library base name (without its source line)."""
    return native_parts(file)[0] if is_native(line) else file


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
        "wait_unheld_s": _round(e.wait_unheld_s),
        "acquisitions": e.acquisitions,
        "forced_switches": e.forced_switches,
        "wait": _distribution(e.wait),
        "hold": _distribution(e.hold),
        "blame": [
            {
                "holder_tid": b.holder_tid,
                "holder_name": b.holder_name,
                "holder_function": b.holder_function,
                "holder_file": _frame_file(b.holder_file, b.holder_line),
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
        "by_generation": {g: dict(_distribution(d), total_s=_round(d["total_s"])) for g, d in exact.gc_by_generation.items()},
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


def _run_delay_share(session: Session, tid: int) -> Optional[float]:
    """The kernel's run-queue delay of the thread over the recording, as a share of its duration."""
    seconds = session.sched.get("seconds") or 0.0
    counters = session.sched["threads"].get(tid)
    if not seconds or counters is None:
        return None
    return _round(counters[1] / 1e9 / seconds)


def _held_cpu_wait_share(session: Session, t) -> float:
    return _round(session.held_cpu_wait.get(t.tid, 0) / t.samples) if t.samples else 0.0


POSITION_KEYS = ("line", "end_line", "column", "end_column")


def _position(session: Optional[Session], frame_ids: dict, f) -> Optional[dict]:
    """The instruction position most seen for a top function's frame at its line (3.11+), or None."""
    if session is None or f.function is None:
        return None
    position = session.frame_position(frame_ids.get((f.function, f.file, f.line), -1))
    return None if position is None else dict(zip(POSITION_KEYS, position))


def _frame_ids(session: Optional[Session]) -> dict:
    if session is None or not session.frame_positions:
        return {}
    return {tuple(frame): fid for fid, frame in session.frames.items()}


def _thread(t, exact=None, pid=None, session: Optional[Session] = None, frame_ids: Optional[dict] = None) -> dict:
    if frame_ids is None:
        frame_ids = _frame_ids(session)
    return {
        "pid": pid,
        "tid": t.tid,
        "name": t.name,
        "samples": t.samples,
        "states": {name: _round(t.states.fraction(code)) for code, name in enumerate(STATE_NAMES)},
        "run_delay_share": _run_delay_share(session, t.tid) if session is not None else None,
        # Part of cpu_wait in which the thread held the GIL: a hold for exact tracing, not for HOLD.
        "cpu_wait_holding_gil": _held_cpu_wait_share(session, t) if session is not None else None,
        # Time in error paths: inside an `except` block, or a `finally` block run by an exception.
        "handling_exception_share": _round(t.handling_share),
        "idle_syscalls": {name: _round(share) for name, share in t.idle_syscalls.items()},
        "idle_kinds": {kind: _round(share) for kind, share in t.idle_kinds.items()},
        "top_functions": [
            {
                "function": f.function,
                "file": _frame_file(f.file, f.line),
                "line": None if is_native(f.line) else f.line,
                "fraction": _round(f.fraction),
                "state": f.state,
                "handling_exception_share": _round(f.handling_share),
                "position": None if is_native(f.line) else _position(session, frame_ids, f),
                **_native_keys("", f.file, f.line),
            }
            for f in t.top_functions
        ],
        "blame": [
            {
                "holder_tid": b.holder_tid,
                "holder_name": b.holder_name,
                "holder_function": b.holder_function,
                "holder_file": _frame_file(b.holder_file, b.holder_line),
                "holder_line": None if is_native(b.holder_line) else b.holder_line,
                "fraction": _round(b.fraction),
                **_native_keys("holder_", b.holder_file, b.holder_line),
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


def report(session: Session, summary: Optional[Summary] = None, recording: Optional[Recording] = None, raw: bool = True) -> dict:
    """The report as a JSON-able dict.

    ``recording`` (default: this session alone) is embedded whole under "recording", so that
    `gilty report` can write every other format from the saved file without recording again
    (not with ``raw=False``: the caller writes it itself).
    """
    summary = summary or summarise(session)
    target = session.target
    errors = session.errors
    frame_ids = _frame_ids(session)
    out = {
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
        # The timeline (recording.times/runs) keeps every step-th pass once a long recording's was
        # coarsened to stay within its budget; the figures here count every pass.
        "timeline": {
            "step": session.timeline_step,
            "resolution_ms": _round(1000.0 * session.timeline_step / session.rate_hz),
            "note": session.timeline_note,
        },
        # The native counts only for a recording made with --native.
        "errors": {key: int(errors[key]) for key in ERROR_KEYS + NATIVE_ERROR_KEYS + GIL_FLAG_KEYS if key in errors},
        "partial": session.partial,
        "partial_reason": session.partial_reason,
        "stopped_by": session.stopped_by,
        "gil_utilisation": _round(summary.gil_utilisation),
        "gc_share": _round(summary.gc_share),
        "mean_waiting_threads": _round(summary.mean_waiting_threads),
        "switch_interval_s": target.switch_interval_s,
        "verdict": summary.verdict.text if summary.verdict else "",
        "verdict_kinds": list(summary.verdict.kinds) if summary.verdict else [],
        "saturation": summary.saturation.to_dict() if summary.saturation else None,
        "threads": [_thread(t, summary.exact, target.pid, session, frame_ids) for t in summary.threads],
        "gc_exact": _gc_exact(summary.exact),
        "exact_overhead": _exact_overhead(summary.exact),
        "tasks": task_view.report(session),
        "event_loops": event_loops.report(session),
        "free_threading": readiness.report(session),
    }
    if raw:
        out["recording"] = (recording or Recording.of(session)).to_dict()
    return out


def render(session: Session, summary: Optional[Summary] = None, recording: Optional[Recording] = None) -> str:
    data = report(session, summary, recording)
    # The analysed part is indented for people; the raw recording (one number per sample) is
    # written compactly on one line, else it would be most of the file's lines.
    raw = data.pop("recording")
    text = json.dumps(data, indent=2)
    return text[:-2] + ',\n  "recording": ' + json.dumps(raw) + "\n}\n"


def _process_info(session: Session, role: str) -> dict:
    first = session.times[0] if session.times else None
    return {
        "pid": session.target.pid,
        "ppid": session.target.ppid,
        "cmdline": session.target.cmdline,
        "role": role,
        "first_sample_s": _round(first),
        "exited": session.exited,
        "exited_at_s": _round(session.exited_at),
    }


def _weighted(reports: list, key: str) -> float:
    total = sum(r["samples"] for r in reports)
    return sum(r[key] * r["samples"] for r in reports) / total if total else 0.0


def recording_report(recording: Recording, raw: bool = True) -> dict:
    """The report of a Recording: for one process the report above, for several the merged figures
    on top and one such report per process in ``processes`` (docs/json-format.md). With
    ``raw=False`` without the "recording" (``render_recording_chunks`` streams it)."""
    role_of = roles(recording)
    per_process = []
    for s in recording.sessions:
        r = report(s, raw=False)  # the whole recording is embedded once, at the top
        r["process"] = _process_info(s, role_of.get(s.target.pid, ""))
        r["process"]["helper"] = recording.helpers.get(s.target.pid)  # what a "helper" is, and how it was told
        per_process.append(r)
    extra = {
        "gates": recording.gates,
        "command_status": recording.command_status,
        "subprocesses": recording.subprocesses,
        "hints": list(recording.notes),
        "skipped": [{"pid": k["pid"], "ppid": k["ppid"], "t": _round(k["t"]), "reason": k["reason"]} for k in recording.skipped],
    }
    if len(recording.sessions) == 1 and not recording.subprocesses:
        out = report(recording.sessions[0], recording=recording, raw=False)
        out.update(extra)
        out["processes"] = per_process
        if raw:
            out["recording"] = recording.to_dict()
        return out
    first = per_process[0]
    verdicts: dict = {}
    for r in per_process:
        if r["verdict"]:
            verdicts.setdefault(r["verdict"], []).append(r["target"]["pid"])
    kinds = sorted({k for r in per_process for k in r["verdict_kinds"]})
    times = {t for s in recording.sessions for t in s.times}
    # Keys some processes lack (the 3.14+ GIL cross-check in a fleet of mixed versions) count 0 there.
    keys = dict.fromkeys(k for r in per_process for k in r["errors"])
    errors = {key: sum(r["errors"].get(key, 0) for r in per_process) for key in keys}
    out = {
        "format_version": FORMAT_VERSION,
        "target": first["target"],
        "command": recording.command,
        "start_time": datetime.datetime.fromtimestamp(recording.start_time, datetime.timezone.utc).isoformat(),
        "duration_s": _round(recording.duration_s),
        "requested_duration_s": recording.requested_duration_s,
        "rate_hz": recording.rate_hz,
        # Passes of the shared schedule; a coarsened timeline keeps only some of their times.
        "samples": len(times)
        if all(s.timeline_step == 1 for s in recording.sessions)
        else max(s.samples for s in recording.sessions),
        "timeline": max((r["timeline"] for r in per_process), key=lambda t: t["step"]),  # the coarsest
        "errors": errors,
        "partial": recording.partial,
        "partial_reason": recording.partial_reason,
        "stopped_by": recording.stopped_by,
        "gil_utilisation": _round(_weighted(per_process, "gil_utilisation")),
        "gc_share": _round(_weighted(per_process, "gc_share")),
        "mean_waiting_threads": _round(_weighted(per_process, "mean_waiting_threads")),
        "switch_interval_s": first["switch_interval_s"],
        "verdict": " ".join(f"[pid {', '.join(map(str, pids))}] {text}" for text, pids in verdicts.items()),
        "verdict_kinds": kinds,
        # The process that waited longest for a CPU speaks for the host.
        "saturation": max(
            (r["saturation"] for r in per_process if r["saturation"]),
            key=lambda sat: sat["run_delay_ms_per_s"],
            default=None,
        ),
        "threads": [t for r in per_process for t in r["threads"]],
        "gc_exact": None,
        "exact_overhead": None,
        "tasks": None,  # per process, under "processes"
        "event_loops": [loop for r in per_process for loop in r["event_loops"]],
        "free_threading": None,  # per process, under "processes"
    }
    out.update(extra)
    out["processes"] = per_process
    if raw:
        out["recording"] = recording.to_dict()
    return out


def render_recording(recording: Recording) -> str:
    return "".join(render_recording_chunks(recording))


def render_recording_chunks(recording: Recording):
    """The JSON report of ``render_recording`` in pieces, the same text: the raw recording is
    written one process at a time, so that only one process's lists exist at once and the whole
    text is never one string (a 3-minute, 9-process recording at 1000 Hz is a 25 MB file)."""
    data = recording_report(recording, raw=False)
    text = json.dumps(data, indent=2)
    yield text[:-2] + ',\n  "recording": '
    # Recording.to_dict without its processes ends in `"processes": []}`; they go in between.
    shell = copy.copy(recording)
    shell.sessions = []
    head = json.dumps(shell.to_dict())
    if not head.endswith('"processes": []}'):  # processes no longer last: write it whole
        yield json.dumps(recording.to_dict()) + "\n}\n"
        return
    yield head[:-3] + "["
    for i, session in enumerate(recording.sessions):
        yield (", " if i else "") + json.dumps(session.to_dict())
    yield "]}\n}\n"
