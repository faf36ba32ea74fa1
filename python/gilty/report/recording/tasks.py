"""The task view of a recording (``record --tasks``) as every format draws it.

A task stack reads, outermost first: ``task NAME`` for each task of the task tree path (the outermost
awaiting task first), the task's coroutine chain (or, for a running task, its thread's Python stack
from the task's coroutine in), and a leaf: ``awaiting KIND (file:line)`` for a suspended task (the
await site is the innermost frame outside asyncio), ``ready`` for one scheduled to run, or the running
task's thread state (``holding_gil``, ``waiting_gil``, ``native``...). Collapsed stacks, the SVG
flame graph and speedscope draw these stacks beside the thread view; the JSON report, the Chrome
trace and the HTML page's Tasks section use the figures below.
"""

from __future__ import annotations

from typing import Optional

from gilty.report.labels import frame_label, process_label, visible
from gilty.sampling.tasks import AWAITING, AWAITING_CHILD, READY, state_name

# Rows of the longest-lived tasks and the most-awaited sites in the JSON report and the HTML page.
TOP = 20
# The thread-level label under which a process's task stacks sit in collapsed stacks and speedscope.
TASKS_LABEL = "asyncio tasks"


def await_label(kind: str, site: tuple) -> str:
    _function, file, line = site
    return f"awaiting {kind} ({file}:{line})"


def leaf_label(session, state: int, await_ref: Optional[tuple]) -> str:
    if state == AWAITING and await_ref is not None:
        kind, frame_id = await_ref
        return await_label(kind, session.frames[frame_id])
    if state == READY:
        return "ready"
    return state_name(state)


def stack_labels(session, path: tuple, stack_id: int, state: int, await_ref: Optional[tuple], name=frame_label) -> list:
    """Labels of one task stack, outermost first (task names made ``visible``: the target names them)."""
    return (
        [f"task {visible(p)}" for p in path]
        + [name(f) for f in reversed(session.stack(stack_id))]
        + [leaf_label(session, state, await_ref)]
    )


def sessions_with_tasks(recording) -> list:
    return [s for s in recording.sessions if getattr(s, "tasks", None) is not None]


def rows(recording, name=frame_label):
    """(session, labels outermost first, samples) for every task stack of the recording."""
    for session in sessions_with_tasks(recording):
        for path, stack_id, state, await_ref, n in session.tasks.rows():
            yield session, stack_labels(session, path, stack_id, state, await_ref, name), n


def _site(session, kind: str, frame_id: int) -> dict:
    function, file, line = session.frames[frame_id]
    return {"kind": kind, "function": function, "file": file, "line": line}


def state_seconds(session) -> dict:
    """{state name: task-seconds} over every task sample; a parent awaiting tasks of its own is
    ``awaiting_child``, apart from the waits themselves (its children's samples)."""
    out: dict = {}
    child = session.tasks.child_waits()
    for (p, _s, state, a), n in session.tasks.counts.items():
        name = AWAITING_CHILD if (p, a) in child else state_name(state)
        out[name] = out.get(name, 0.0) + n * session.period_s
    return out


def report(session) -> Optional[dict]:
    """The JSON ``tasks`` object of one process (docs/json-format.md), None without ``--tasks``."""
    view = getattr(session, "tasks", None)
    if view is None:
        return None
    period = session.period_s
    total = view.samples
    own = view.own_samples()
    stacks = []
    for path, stack_id, state, await_ref, n in view.rows():
        stacks.append(
            {
                "path": list(path),
                "stack": [list(f) for f in reversed(session.stack(stack_id))],
                "state": state_name(state),
                "awaiting": _site(session, *await_ref) if state == AWAITING and await_ref else None,
                "samples": n,
                "seconds": round(n * period, 6),
            }
        )
    return {
        "passes": view.passes,
        "reads": view.reads,
        "samples": total,
        "mean_tasks": round(total / view.passes, 3) if view.passes else 0.0,
        "state_seconds": {k: round(v, 6) for k, v in state_seconds(session).items()},
        "stacks": stacks,
        "longest_lived": [
            {
                "id": tid,
                "name": name,
                "first_s": round(first, 6),
                "last_s": round(last, 6),
                "lifetime_s": round(last - first + period, 6),
                "samples": n,
            }
            for tid, name, first, last, n in view.longest_lived(TOP)
        ],
        "await_sites": [
            {
                **_site(session, kind, frame_id),
                "samples": n,
                "seconds": round(n * period, 6),
                "share": round(n / own, 6) if own else 0.0,
            }
            for kind, frame_id, n in view.await_sites()[:TOP]
        ],
        "errors": dict(view.errors),
    }


def chrome_events(session, pid: int, offset: float, slice_fn) -> list:
    """One slice per task, from the first to the last pass it was seen in, on one track per task
    (tids from 1,000,000,000 up, which no thread of Linux has)."""
    view = getattr(session, "tasks", None)
    if view is None:
        return []
    events = []
    lives = sorted(view.lifetimes.items(), key=lambda kv: kv[1][0])
    for i, ((task_id, name), (first, last, n)) in enumerate(lives[:5000]):
        track = 1_000_000_000 + i
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": track, "args": {"name": f"task {visible(name)}"}})
        events.append(
            slice_fn(
                f"task {visible(name)}",
                "asyncio_task",
                pid,
                track,
                offset + first,
                offset + last + session.period_s,
                {"id": hex(task_id), "samples": n},
            )
        )
    return events


def html_data(session) -> Optional[dict]:
    """What the HTML page's Tasks section draws for one process."""
    data = report(session)
    if data is None:
        return None
    return {
        "label": process_label(session),
        "passes": data["passes"],
        "reads": data["reads"],
        "mean_tasks": data["mean_tasks"],
        "state_seconds": data["state_seconds"],
        "longest_lived": data["longest_lived"],
        "await_sites": data["await_sites"],
        "errors": data["errors"],
    }
