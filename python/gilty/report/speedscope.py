"""speedscope's file format (``.speedscope.json``): one sampled profile per process and thread.

The root frame of every stack is the thread's state (holding_gil, waiting_gil, native, idle,
gc, unknown), so speedscope's left-heavy and sandwich views split a thread's time by state.
Weights are seconds: samples times the sampling period.
"""

from __future__ import annotations

import json

from gilty import __version__
from gilty.report.labels import process_label, state_name, thread_label
from gilty.sampling.session import STATE_NAMES, Recording, Session

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


def _profiles(session: Session, table: _FrameTable) -> list:
    period = session.period_s
    by_tid: dict = {}
    for (tid, state, stack_id), n in session.stack_counts().items():
        stack = [table.state(state)] + [table.python(f) for f in reversed(session.stack(stack_id))]
        by_tid.setdefault(tid, []).append((stack, n * period))
    profiles = []
    for tid in session.tids():
        samples = sorted(by_tid.get(tid, []))  # same recording, same file
        total = sum(w for _, w in samples)
        profiles.append(
            {
                "type": "sampled",
                "name": f"pid {session.target.pid} · {thread_label(session, tid)}",
                "unit": "seconds",
                "startValue": 0,
                "endValue": total,
                "samples": [stack for stack, _ in samples],
                "weights": [w for _, w in samples],
            }
        )
    return profiles


def profile_file(recording: Recording) -> dict:
    table = _FrameTable()
    for state in range(len(STATE_NAMES)):  # states first: the same indices in every file
        table.state(state)
    profiles = [p for session in recording.sessions for p in _profiles(session, table)]
    names = ", ".join(process_label(s) for s in recording.sessions)
    return {
        "$schema": SCHEMA_URL,
        "shared": {"frames": table.frames},
        "profiles": profiles,
        "name": f"gilty: {names}",
        "activeProfileIndex": 0,
        "exporter": f"gilty {__version__}",
    }


def render(recording: Recording) -> str:
    return json.dumps(profile_file(recording)) + "\n"
