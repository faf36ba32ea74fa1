"""speedscope's file format (``.speedscope.json``): one sampled profile per process and thread.

The root frame of every stack is the thread's state (holding_gil, waiting_gil, native, idle,
gc, unknown), so speedscope's left-heavy and sandwich views split a thread's time by state.
Samples are in time order (per stack slot, ``sampling/stack_slots.py``), so speedscope's Time Order
view shows what a thread did when; weights are seconds: samples times the sampling period. Idle
samples are left out and a server's workers merged unless asked otherwise (``report/pictures.py``);
profiles come busiest first and the file opens on the busiest. A recording made with ``--tasks``
adds, last, one "asyncio tasks" profile per process: each sample a task stack, weights in
task-seconds (``report/task_view.py``).
"""

from __future__ import annotations

import json
from typing import Optional

from gilty import __version__
from gilty.report.labels import state_name, visible
from gilty.report.pictures import PictureOptions, drawn, groups, thread_name
from gilty.report.recording import tasks as task_view
from gilty.sampling.native_frames import frame_text, is_native, native_parts
from gilty.sampling.session import IDLE, STATE_NAMES, UNKNOWN, Recording
from gilty.sampling.stack_slots import slot_spans

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


class _FrameTable:
    """speedscope's shared frame list: one entry per distinct frame, referred to by index."""

    def __init__(self) -> None:
        self.frames: list = []
        self._index: dict = {}

    def index(self, key: tuple, frame: dict) -> int:
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.frames)
            self.frames.append(frame)
        return found

    def state(self, state: int) -> int:
        name = state_name(state)
        return self.index(("state", name), {"name": name})

    def python(self, frame: tuple, position: Optional[tuple] = None) -> int:
        """``position``: the (line, end_line, column, end_column) most seen for the frame (3.11+), whose
        first column becomes speedscope's 1-based ``col``; a frame is one entry per line, as ever."""
        function, file, line = frame
        if is_native(line):
            # A C frame of `record --native`: named as the other formats name it; its source file and
            # line where its library has line tables, else its library as file.
            library, source, source_line = native_parts(file)
            entry = {"name": frame_text(function, file, line), "file": source or library}
            if source is not None:
                entry["line"] = source_line
            return self.index(("frame", function, file, line), entry)
        entry = {"name": function, "file": file}
        if line >= 0:  # -1: a frame whose line could not be read; speedscope's line is optional
            entry["line"] = line
        if position is not None and position[2] is not None:
            entry["col"] = position[2] + 1
        return self.index(("frame", function, file, line), entry)


def timed_rows(session):
    """[(start_s, {(tid, state, stack_id): samples})] of a session in time order: its stack slots, or
    for a recording saved without them, the whole recording as one slot."""
    if session.stack_slots is None or not len(session.stack_slots):
        return [(0.0, session.stack_counts())]
    return [(span[0], counts) for span, counts in zip(slot_spans(session), session.stack_slots.counts)]


def _profiles(recording: Recording, table: _FrameTable, options: Optional[PictureOptions]) -> list:
    """[(busy seconds, profile)] per drawn (process, thread), samples in time order."""
    by_thread: dict = {}  # (group, thread name) -> (group, [(start_s, order, stack, weight)])
    order = 0
    for group in groups(recording, options):
        for s in group.sessions:
            names: dict = {}
            stacks: dict = {}  # (state, stack_id) -> frame indices, built once per session
            for start, counts in timed_rows(s):
                for (tid, state, stack_id), n in counts.items():
                    if not n or not drawn(state, options):
                        continue
                    name = names.get(tid)
                    if name is None:
                        name = names[tid] = thread_name(group, s, tid)
                    stack = stacks.get((state, stack_id))
                    if stack is None:
                        stack = stacks[(state, stack_id)] = (table.state(state),) + tuple(
                            table.python(s.frames[f], s.frame_position(f)) for f in reversed(s.stacks.get(stack_id, ()))
                        )
                    entry = by_thread.setdefault((id(group), name), (group, []))
                    entry[1].append((start, order, stack, n * s.period_s))
                    order += 1
    profiles = []
    not_busy = (table.state(IDLE), table.state(UNKNOWN))
    for (_gid, thread), (group, rows) in by_thread.items():
        # Merged workers: each worker's slots interleaved by time (one session's are in order already).
        rows.sort(key=lambda r: (r[0], r[1]))
        samples: list = []
        weights: list = []
        for _start, _order, stack, w in rows:
            if samples and samples[-1] == stack:  # one stack going on from one slot into the next
                weights[-1] += w
            else:
                samples.append(stack)
                weights.append(w)
        total = sum(weights)
        busy = sum(w for stack, w in zip(samples, weights) if stack[0] not in not_busy)
        prefix = f"pid {group.sessions[0].target.pid}" if not group.merged else group.label
        profiles.append(
            (
                busy,
                {
                    "type": "sampled",
                    "name": f"{prefix} · {thread}",
                    "unit": "seconds",
                    "startValue": 0,
                    "endValue": total,
                    "samples": [list(stack) for stack in samples],
                    "weights": [round(w, 9) for w in weights],  # to the nanosecond: 0.3, not 0.30000000000000004
                },
            )
        )
    return profiles


def _task_profiles(recording: Recording, table: _FrameTable) -> list:
    """[(busy seconds, profile)]: one "asyncio tasks" profile per process recorded with --tasks,
    each sample a task stack (``report/task_view.py``): task path, coroutine chain, leaf."""
    out = []
    for session in task_view.sessions_with_tasks(recording):
        weights: dict = {}
        for path, stack_id, state, await_ref, n in session.tasks.rows():
            stack = [table.index(("task", p), {"name": f"task {visible(p)}"}) for p in path]
            stack += [table.python(f) for f in reversed(session.stack(stack_id))]
            leaf = task_view.leaf_label(session, state, await_ref)
            stack.append(table.index(("leaf", leaf), {"name": leaf}))
            weights[tuple(stack)] = weights.get(tuple(stack), 0.0) + n * session.period_s
        samples = sorted(weights.items())
        total = sum(w for _, w in samples)
        # Ranked after every thread: task-seconds add up over concurrent tasks.
        out.append(
            (
                -1.0,
                {
                    "type": "sampled",
                    "name": f"pid {session.target.pid} · {task_view.TASKS_LABEL}",
                    "unit": "seconds",
                    "startValue": 0,
                    "endValue": total,
                    "samples": [list(stack) for stack, _ in samples],
                    "weights": [w for _, w in samples],
                },
            )
        )
    return out


def profile_file(recording: Recording, options: Optional[PictureOptions] = None) -> dict:
    table = _FrameTable()
    for state in range(len(STATE_NAMES)):  # states first: the same indices in every file
        table.state(state)
    ranked = _profiles(recording, table, options) + _task_profiles(recording, table)
    # Busiest first (stable: equal ones keep the recording's order), and the file opens on it.
    ranked.sort(key=lambda item: -item[0])
    names = ", ".join(g.label for g in groups(recording, options))
    return {
        "$schema": SCHEMA_URL,
        "shared": {"frames": table.frames},
        "profiles": [p for _busy, p in ranked],
        "name": f"gilty: {names}",
        "activeProfileIndex": 0,
        "exporter": f"gilty {__version__}",
    }


def render(recording: Recording, options: Optional[PictureOptions] = None) -> str:
    return json.dumps(profile_file(recording, options), separators=(",", ":")) + "\n"
