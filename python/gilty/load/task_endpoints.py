"""Per endpoint, where its requests' asyncio tasks spent their wall time (``gilty load --tasks``).

An ASGI server runs each request in a task of its own (uvicorn: one per request). A task belongs to an
endpoint when its stack (the coroutine chain of a suspended task, the thread's stack from the task's
coroutine in for a running one) passes through the framework's dispatch frame: the same rule as the
thread view (``load/endpoints.py``), the handler being the first application frame inside it. Each
task sample is one sampling period of that task's wall time; they are split into running (holding
the GIL), waiting for the GIL, native, blocked (a synchronous call blocking the loop), waiting for a
CPU, ready (scheduled, waiting for the loop) and awaiting, the last by what and at which line (the
innermost frame outside asyncio).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from gilty.load.endpoints import FRAMEWORK, handler_frame
from gilty.load.sites import NO_APP, AppScope, library_prefixes
from gilty.load.startup import startup_frame
from gilty.sampling.source_files import SourceFiles
from gilty.sampling.tasks import AWAITING, state_name

TOP_ENDPOINTS = 10
TOP_AWAITS = 5


@dataclass
class TaskEndpoint:
    function: str
    file: str
    task_s: float  # task-seconds of the requests' tasks in this handler
    states: dict  # state name (awaiting, ready, holding_gil, waiting_gil, native, idle, ...) -> share of task_s
    awaits: list = field(default_factory=list)  # [{"kind", "function", "file", "line", "code", "share"}], most first

    @property
    def label(self) -> str:
        return f"{self.function} ({os.path.basename(self.file)})"


def source_of(files: SourceFiles, file: str, line: int) -> Optional[str]:
    """The await's source line, read from the live server as it could read it (None when refused)."""
    text = files.lines(file, line, line)[0].get(line, "").strip() if file and line > 0 else ""
    return text[:80] or None


def task_endpoint_table(sessions: list, app: AppScope = NO_APP) -> list:
    """[TaskEndpoint] over the sessions recorded with tasks, most task time first."""
    acc: dict = {}  # (function, file) -> [{state: seconds}, {(kind, frame): seconds}]
    readers: dict = {}  # pid -> SourceFiles: each file read once per server process
    files: dict = {}  # frame -> the reader of the first server process it was seen in
    for s in sessions:
        view = getattr(s, "tasks", None)
        if view is None:
            continue
        prefixes = library_prefixes(s)
        handlers: dict = {}
        for (_path, stack_id, state, await_id), n in view.counts.items():
            if stack_id not in handlers:
                stack = s.stack(stack_id)
                handlers[stack_id] = None if not stack or startup_frame(stack) else handler_frame(stack, prefixes, app)
            frame = handlers[stack_id]
            if frame is None or frame == FRAMEWORK:
                continue
            seconds = n * s.period_s
            entry = acc.setdefault((frame[0], frame[1]), [{}, {}])
            name = state_name(state)
            entry[0][name] = entry[0].get(name, 0.0) + seconds
            if state == AWAITING and await_id in view.awaits:
                kind, frame_id = view.awaits[await_id]
                key = (kind, s.frames[frame_id])
                if key[1] not in files:
                    files[key[1]] = readers.setdefault(s.target.pid, SourceFiles(s.target.pid))
                entry[1][key] = entry[1].get(key, 0.0) + seconds
    out = []
    for (function, file), (states, awaits) in acc.items():
        total = sum(states.values())
        if total <= 0:
            continue
        ranked = sorted(awaits.items(), key=lambda kv: -kv[1])[:TOP_AWAITS]
        out.append(
            TaskEndpoint(
                function=function,
                file=file,
                task_s=total,
                states={k: v / total for k, v in sorted(states.items(), key=lambda kv: -kv[1])},
                awaits=[
                    {
                        "kind": kind,
                        "function": f[0],
                        "file": f[1],
                        "line": f[2],
                        "code": source_of(files[f], f[1], f[2]),
                        "share": secs / total,
                    }
                    for (kind, f), secs in ranked
                ],
            )
        )
    out.sort(key=lambda e: -e.task_s)
    return out[:TOP_ENDPOINTS]


def await_words(e: TaskEndpoint) -> Optional[str]:
    """``requests to `slow` spend 70 % awaiting `pool.acquire()` (db.py:18)``, for the top await."""
    if not e.awaits:
        return None
    a = e.awaits[0]
    what = f"`{a['code']}`" if a["code"] else f"{a['kind']} in `{a['function']}`"
    return f"requests to `{e.label}` spend {a['share']:.0%} of their time awaiting {what} ({os.path.basename(a['file'])}:{a['line']}, {a['kind']})"
