"""Chrome trace events (``.trace.json``) for Perfetto and chrome://tracing.

Per process: its name, one track per thread with a slice per run of one state, beside it a
"stack" track of nested slices, one per Python frame (a flame chart over time), a "GIL owner"
track naming the thread that held the GIL, and, with exact tracing, a track of every garbage
collection as traced, and with ``--tasks`` one track per asyncio task, a slice from the first to
the last pass it was seen in. Times are microseconds from the start of the recording. Format: the
"JSON Object Format" of the Trace Event Format document.

Compact on purpose: a frame slice lasts as long as the frame stays on the stack, across runs
(a thread handing the GIL back and forth in one function is one slice per frame, not one per
run; a run is cut at stack-slot edges only where its stack changed), names are ``function (file.py:line)``, and each file's whole path is written once, in
``otherData.files``.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from typing import Optional

from gilty import __version__
from gilty.report.labels import command_text, state_name, thread_label_in_session
from gilty.report.pictures import FrameNames, frame_names
from gilty.report.recording import tasks as task_view
from gilty.sampling.native_frames import is_native, native_offset, native_parts
from gilty.sampling.session import GC, HOLDING_GIL, IDLE, NO_STACK, Recording, Session

# Pseudo-threads get ids above the kernel's PID_MAX_LIMIT (2^22), so no real thread has them.
GIL_OWNER_TID = (1 << 22) + 1
EXACT_GC_TID = (1 << 22) + 2
# A thread's stack track: its tid plus this, above every real tid and both pseudo-threads.
STACK_TRACK = 1 << 23
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
        # Whole microseconds, the end rounded on its own: a slice ending where the next begins
        # ends on the same number, so nesting and tiling survive the rounding.
        "ts": round(start_s * US),
        "dur": max(round(end_s * US) - round(start_s * US), 0),
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


def _slot_stacks(session: Session) -> tuple:
    """(first pass of each stack slot, per slot {(tid, state): the stack first seen in it}).

    A slot's counts are in first-seen order, so for a thread whose run goes on across the slot's
    first pass, the first stack of (tid, state) in the slot is its stack at that pass."""
    slots = session.stack_slots
    if slots is None:
        return [], []
    first = []
    for counts in slots.counts:
        seen: dict = {}
        for tid, state, stack_id in counts:
            seen.setdefault((tid, state), stack_id)
        first.append(seen)
    return list(slots.first), first


def _pieces(runs: list, slot_first: list, slot_stack: list):
    """(first pass, passes, stack_id) of a thread's runs cut at stack-slot edges: a run keeps the stack
    of its first pass only, so past a slot edge the piece takes the thread's stack at that edge
    (``_slot_stacks``), and a thread that stays in one state while its functions change (a
    CPU-bound phase after another) shows the change at slot resolution."""
    for tid, first, passes, state, stack_id, _nr in runs:
        end = first + passes
        k = bisect_right(slot_first, first)  # the next slot edge after the run's start
        start = first
        while k < len(slot_first) and slot_first[k] < end:
            yield start, slot_first[k] - start, stack_id
            start = slot_first[k]
            stack_id = slot_stack[k].get((tid, state), stack_id)
            k += 1
        yield start, end - start, stack_id


def _native_args(frame) -> Optional[dict]:
    """A C frame's slice args (`record --native`): its library, offset, and source file and line where
    the library has line tables; None for a Python frame (its name says all)."""
    function, file, line = frame
    if not is_native(line):
        return None
    library, source, source_line = native_parts(file)
    args = {"library": library, "offset": hex(native_offset(line))}
    if source is not None:
        args.update(file=source, line=source_line)
    return args


def _stack_slices(session: Session, tid: int, runs: list, names: FrameNames, offset: float, slot_stacks=([], [])) -> list:
    """One thread's frames over time: nested slices, each as long as its frame stayed on the stack.

    A run knows the stack of its first pass, so a frame is seen from the start of the first run
    (or piece of a run past a stack-slot edge, ``_pieces``) that had it to the end of the last
    consecutive one that still had it (same frame at the same depth, every frame under it the
    same). A pass the thread was absent from ends every frame.
    """
    pid = session.target.pid
    track = tid + STACK_TRACK
    out = []
    open_frames: list = []  # [(label, start_s, frame)], outermost first
    last_end = None

    def close(depth: int, at: float) -> None:
        while len(open_frames) > depth:
            label, start, frame = open_frames.pop()
            out.append((len(open_frames), _slice(label, "stack", pid, track, start, at, _native_args(frame))))

    for first, passes, stack_id in _pieces(runs, *slot_stacks):
        start = offset + session.pass_start(first)
        end = offset + session.pass_end(first + passes - 1)
        if last_end is not None and start - last_end > 1e-9:
            close(0, last_end)  # the thread was not seen in between
        frames = list(reversed(session.stack(stack_id))) if stack_id != NO_STACK else []
        labels = [names.short(f) for f in frames]
        common = 0
        while common < min(len(labels), len(open_frames)) and open_frames[common][0] == labels[common]:
            common += 1
        close(common, start)
        open_frames.extend((label, start, frame) for label, frame in zip(labels[common:], frames[common:]))
        last_end = end
    if last_end is not None:
        close(0, last_end)
    # Parents before children at one timestamp, as viewers build the nesting in file order.
    out.sort(key=lambda item: (item[1]["ts"], -item[1]["dur"], item[0]))
    return [e for _depth, e in out]


def session_events(session: Session, offset: float = 0.0, names: FrameNames = None) -> list:
    pid = session.target.pid
    names = names or frame_names_of(session)
    events = [
        _meta("process_name", pid, 0, {"name": f"python {pid} {command_text(session)}"}),
        _meta("process_labels", pid, 0, {"labels": f"Python {session.target.python_version}"}),
        _meta("thread_name", pid, GIL_OWNER_TID, {"name": "GIL owner"}),
        _meta("thread_sort_index", pid, GIL_OWNER_TID, {"sort_index": -2}),
    ]
    for i, tid in enumerate(session.tids()):
        events.append(_meta("thread_name", pid, tid, {"name": thread_label_in_session(session, tid)}))
        events.append(_meta("thread_sort_index", pid, tid, {"sort_index": 2 * i}))
        events.append(_meta("thread_name", pid, tid + STACK_TRACK, {"name": thread_label_in_session(session, tid) + " stack"}))
        events.append(_meta("thread_sort_index", pid, tid + STACK_TRACK, {"sort_index": 2 * i + 1}))
    runs = session.runs()
    by_tid: dict = {}
    for run in runs:
        by_tid.setdefault(run[0], []).append(run)
    for tid, first, passes, state, stack_id, nr in runs:
        args = {"syscall": session.syscall_label(nr)} if state == IDLE else None
        start = offset + session.pass_start(first)
        end = offset + session.pass_end(first + passes - 1)
        events.append(_slice(state_name(state), "gc" if state == GC else "state", pid, tid, start, end, args))
    slot_stacks = _slot_stacks(session)
    for tid, thread_runs in by_tid.items():
        events.extend(_stack_slices(session, tid, thread_runs, names, offset, slot_stacks))
    events.extend(_holder_slices(session, runs, offset))
    if session.exact:
        events.append(_meta("thread_name", pid, EXACT_GC_TID, {"name": "GC (exact)"}))
        events.append(_meta("thread_sort_index", pid, EXACT_GC_TID, {"sort_index": -1}))
        events.extend(_exact_gc_slices(session, offset))
    events.extend(task_view.chrome_events(session, pid, offset, _slice))
    return events


def frame_names_of(session: Session) -> FrameNames:
    return FrameNames(session.frames.values())


def trace(recording: Recording) -> dict:
    events = []
    names = frame_names(recording)
    for session in recording.sessions:
        # Processes followed later start later on the shared time axis.
        offset = max(session.start_time - recording.start_time, 0.0)
        events.extend(session_events(session, offset, names))
    files = sorted({str(f[1]) for s in recording.sessions for f in s.frames.values()})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "exporter": f"gilty {__version__}",
            "rate_hz": recording.rate_hz,
            "pids": recording.pids,
            "stack_track_offset": STACK_TRACK,
            "files": files,  # the whole paths of the files frames name by their base name
            # Set when a long recording's timeline was coarsened: the slices are at that resolution.
            "timeline_notes": {str(s.target.pid): s.timeline_note for s in recording.sessions if s.timeline_note},
        },
    }


def render(recording: Recording) -> str:
    # One event per line: small, and still readable with grep.
    doc = trace(recording)
    events = ",\n".join(json.dumps(e, separators=(",", ":")) for e in doc.pop("traceEvents"))
    rest = json.dumps(doc, separators=(",", ":"))[1:-1]
    return '{"traceEvents":[\n' + events + "\n]," + rest + "}\n"
