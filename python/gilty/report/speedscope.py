"""speedscope's file format (``.speedscope.json``): one sampled profile per process and thread.

The root frame of every stack is the thread's state (holding_gil, waiting_gil, native, idle,
gc, unknown), so speedscope's left-heavy and sandwich views split a thread's time by state.
Weights are seconds: samples times the sampling period. Idle samples are left out and a
server's workers merged unless asked otherwise (``report/pictures.py``); profiles come busiest
first and the file opens on the busiest.
"""

from __future__ import annotations

import json
from typing import Optional

from gilty import __version__
from gilty.report.labels import state_name
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

    def python(self, frame: tuple, position: Optional[tuple] = None) -> int:
        """``position``: the (line, end_line, column, end_column) most seen for the frame (3.11+), whose
        first column becomes speedscope's 1-based ``col``; a frame is one entry per line, as ever."""
        function, file, line = frame
        entry = {"name": function, "file": file, "line": line}
        if position is not None and position[2] is not None:
            entry["col"] = position[2] + 1
        return self.index(("frame", function, file, line), entry)


def _profiles(recording: Recording, table: _FrameTable, options: Optional[PictureOptions]) -> list:
    """[(busy seconds, profile)] per drawn (process, thread)."""
    by_thread: dict = {}
    for group, thread, state, session, stack_id, n in stack_rows(recording, options):
        stack = [table.state(state)] + [table.python(session.frames[f], session.frame_position(f))
                                        for f in reversed(session.stacks.get(stack_id, ()))]
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


def profile_file(recording: Recording, options: Optional[PictureOptions] = None) -> dict:
    table = _FrameTable()
    for state in range(len(STATE_NAMES)):  # states first: the same indices in every file
        table.state(state)
    ranked = _profiles(recording, table, options)
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
