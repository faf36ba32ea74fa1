"""speedscope's file format (``.speedscope.json``): one sampled profile per process and thread.

The root frame of every stack is the thread's state (holding_gil, waiting_gil, native, idle,
gc, unknown), so speedscope's left-heavy and sandwich views split a thread's time by state.
Weights are seconds: samples times the sampling period. Idle samples are left out and a
server's workers merged unless asked otherwise (``report/pictures.py``); profiles come busiest
first and the file opens on the busiest. A recording made with ``--tasks`` adds, last, one
"asyncio tasks" profile per process: each sample a task stack (``report/task_view.py``).
"""

from __future__ import annotations

import json
from typing import Optional

from gilty import __version__
from gilty.report import task_view
from gilty.report.labels import state_name, visible
from gilty.report.pictures import PictureOptions, groups, stack_rows
from gilty.sampling.session import IDLE, STATE_NAMES, UNKNOWN, Recording

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

    def python(self, frame: tuple) -> int:
        function, file, line = frame
        return self.index(("frame", function, file, line), {"name": function, "file": file, "line": line})


def _profiles(recording: Recording, table: _FrameTable, options: Optional[PictureOptions]) -> list:
    """[(busy seconds, profile)] per drawn (process, thread)."""
    by_thread: dict = {}
    for group, thread, state, session, stack_id, n in stack_rows(recording, options):
        stack = [table.state(state)] + [table.python(f) for f in reversed(session.stack(stack_id))]
        entry = by_thread.setdefault((id(group), thread), (group, {}))
        weights = entry[1]
        weights[tuple(stack)] = weights.get(tuple(stack), 0.0) + n * session.period_s
    profiles = []
    for (_gid, thread), (group, weights) in by_thread.items():
        samples = sorted(weights.items())  # same recording, same file
        total = sum(w for _, w in samples)
        busy = sum(w for stack, w in samples if stack[0] not in (table.state(IDLE), table.state(UNKNOWN)))
        prefix = f"pid {group.sessions[0].target.pid}" if not group.merged else group.label
        profiles.append((busy, {
            "type": "sampled",
            "name": f"{prefix} · {thread}",
            "unit": "seconds",
            "startValue": 0,
            "endValue": total,
            "samples": [list(stack) for stack, _ in samples],
            "weights": [w for _, w in samples],
        }))
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
        out.append((-1.0, {
            "type": "sampled",
            "name": f"pid {session.target.pid} · {task_view.TASKS_LABEL}",
            "unit": "seconds",
            "startValue": 0,
            "endValue": total,
            "samples": [list(stack) for stack, _ in samples],
            "weights": [w for _, w in samples],
        }))
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
    return json.dumps(profile_file(recording, options)) + "\n"
