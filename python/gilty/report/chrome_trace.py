"""Chrome trace events (``.trace.json``) for Perfetto and chrome://tracing.

Per process: its name, one track per thread with a slice per run of one state (its stack in
``args``), a "GIL owner" track naming the thread that held the GIL, and, with exact tracing,
a track of every garbage collection as traced. Times are microseconds from the start of the
recording. Format: the "JSON Object Format" of the Trace Event Format document.
"""

from __future__ import annotations

import json
from typing import Optional

from gilty import __version__
from gilty.report.labels import command_text, stack_labels, state_name, thread_label
from gilty.sampling.session import GC, HOLDING_GIL, IDLE, Recording, Session

# Pseudo-threads get ids above the kernel's PID_MAX_LIMIT (2^22), so no real thread has them.
GIL_OWNER_TID = (1 << 22) + 1
EXACT_GC_TID = (1 << 22) + 2
US = 1e6


def _meta(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _slice(name: str, cat: str, pid: int, tid: int, start_s: float, end_s: float, args: Optional[dict] = None) -> dict:
    event = {
        "ph": "X",
        "name": name,
        "cat": cat,
        "pid": pid,
        "tid": tid,
        "ts": round(start_s * US, 3),
        "dur": round(max(end_s - start_s, 0.0) * US, 3),
    }
    if args:
        event["args"] = args
    return event


def _holder_slices(session: Session, runs: list, offset: float) -> list:
    """The GIL owner track: consecutive passes with the same holder (and gc or not) as one slice."""
    holder: dict = {}  # pass -> (tid, state); the first holder seen wins, as blame does
    for tid, first, passes, state, _stack, _nr in runs:
        if state == HOLDING_GIL or state == GC:
            for i in range(first, first + passes):
                holder.setdefault(i, (tid, state))
    pid = session.target.pid
    events = []
    current = None  # [first pass, last pass, (tid, state)]
    for i in sorted(holder):
        who = holder[i]
        if current is not None and current[1] + 1 == i and current[2] == who:
            current[1] = i
            continue
        if current is not None:
            events.append(_holder_slice(session, pid, current, offset))
        current = [i, i, who]
    if current is not None:
        events.append(_holder_slice(session, pid, current, offset))
    return events


def _holder_slice(session: Session, pid: int, run: list, offset: float) -> dict:
    first, last, (tid, state) = run
    name = session.thread_name(tid) + (" (gc)" if state == GC else "")
    return _slice(
        name,
        "gc" if state == GC else "gil",
        pid,
        GIL_OWNER_TID,
        offset + session.pass_start(first),
        offset + session.pass_end(last),
        {"tid": tid, "state": state_name(state)},
    )


def _exact_gc_slices(session: Session, offset: float) -> list:
    pid = session.target.pid
    events = []
    for c in session.exact.get("collections", []) if session.exact else []:
        generation = c.get("generation")
        name = f"gc gen {generation}" if generation is not None else "gc"
        args = {"tid": c.get("tid"), "collected": c.get("collected"), "open": c.get("open")}
        start = offset + c["start_s"]
        events.append(_slice(name, "gc", pid, EXACT_GC_TID, start, start + c["duration_s"], args))
    return events


def session_events(session: Session, offset: float = 0.0) -> list:
    pid = session.target.pid
    events = [
        _meta("process_name", pid, 0, {"name": f"python {pid} {command_text(session)}"}),
        _meta("process_labels", pid, 0, {"labels": f"Python {session.target.python_version}"}),
        _meta("thread_name", pid, GIL_OWNER_TID, {"name": "GIL owner"}),
        _meta("thread_sort_index", pid, GIL_OWNER_TID, {"sort_index": -2}),
    ]
    for tid in session.tids():
        events.append(_meta("thread_name", pid, tid, {"name": thread_label(session, tid)}))
    runs = session.runs()
    for tid, first, passes, state, stack_id, nr in runs:
        args: dict = {"stack": stack_labels(session, stack_id)}
        if state == IDLE:
            args["syscall"] = session.syscall_label(nr)
        start = offset + session.pass_start(first)
        end = offset + session.pass_end(first + passes - 1)
        events.append(_slice(state_name(state), "gc" if state == GC else "state", pid, tid, start, end, args))
    events.extend(_holder_slices(session, runs, offset))
    if session.exact:
        events.append(_meta("thread_name", pid, EXACT_GC_TID, {"name": "GC (exact)"}))
        events.append(_meta("thread_sort_index", pid, EXACT_GC_TID, {"sort_index": -1}))
        events.extend(_exact_gc_slices(session, offset))
    return events


def trace(recording: Recording) -> dict:
    events = []
    for session in recording.sessions:
        # Processes followed later start later on the shared time axis.
        offset = max(session.start_time - recording.start_time, 0.0)
        events.extend(session_events(session, offset))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"exporter": f"gilty {__version__}", "rate_hz": recording.rate_hz, "pids": recording.pids},
    }


def render(recording: Recording) -> str:
    return json.dumps(trace(recording)) + "\n"
