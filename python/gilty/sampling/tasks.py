"""The task view of a recording (``record --tasks``): samples per asyncio task, folded natively.

Each sampling pass reads every task of the target (``crates/gilty-core/src/sampling/task_record.rs``) and
counts one sample per pending task, keyed by its *task stack*: the task tree path (outermost awaiting
task first, by name), its coroutine chain, and either what it awaits and where (a suspended task) or
its thread's state in that pass (a running task, whose stack is then its thread's Python stack from
the task's coroutine in). A ``TaskView`` merges those batches; its stack and frame ids are the
session's own (``Session.stack``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from gilty.sampling.thread_states import STATE_NAMES

AWAITING = 100  # suspended in an await
READY = 101  # pending, awaiting nothing: scheduled, waiting for its turn on the loop
NO_AWAIT = -1
# Awaits through which a task waits for tasks of its own (aiohttp's RequestHandler.start awaiting its
# handler's task, a gather, a TaskGroup, a shield): the children's own samples say what is waited for,
# so the parent's are not a second wait. Named apart in task-seconds, left out of the await sites.
CHILD_KINDS = frozenset(("task", "gather", "taskgroup", "shield", "wait", "wait_for"))
AWAITING_CHILD = "awaiting_child"
ERROR_KEYS = ("torn_dropped", "unreadable", "changed", "running_unmatched", "read_failed")


def state_name(state: int) -> str:
    """``awaiting``, ``ready``, or the running task's thread state (``holding_gil``, ...)."""
    if state == AWAITING:
        return "awaiting"
    if state == READY:
        return "ready"
    return STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else f"state_{state}"


class TaskView:
    """Task samples of one process: counts per (path, stack, state, await), and each task's life."""

    def __init__(self) -> None:
        self.passes = 0  # passes the task reads stand for
        self.reads = 0  # task reads made (fewer than passes when reads were spread: task_record.rs)
        self.counts: dict = {}  # (path_id, stack_id, state, await_id) -> samples
        self.paths: dict = {}  # path_id -> (name, ...) outermost first
        self.awaits: dict = {}  # await_id -> (kind, frame_id of the await site)
        self.lifetimes: dict = {}  # (task id, name) -> [first seen s, last seen s, samples]
        self.errors = dict.fromkeys(ERROR_KEYS, 0)

    def add_batch(self, batch: Mapping[str, Any]) -> None:
        self.passes += int(batch.get("passes", 0))
        self.reads += int(batch.get("reads", 0))
        counts = self.counts
        for path, stack, state, await_id, n in batch.get("counts", ()):
            key = (path, stack, state, await_id)
            counts[key] = counts.get(key, 0) + n
        self.paths.update({int(k): tuple(v) for k, v in batch.get("paths", {}).items()})
        self.awaits.update({int(k): (v[0], v[1]) for k, v in batch.get("awaits", {}).items()})
        for task_id, name, first, last, n in batch.get("lifetimes", ()):
            life = self.lifetimes.get((task_id, name))
            if life is None:
                self.lifetimes[(task_id, name)] = [first, last, n]
            else:
                life[0], life[1], life[2] = min(life[0], first), max(life[1], last), life[2] + n
        for key in ERROR_KEYS:
            self.errors[key] += int(batch.get("errors", {}).get(key, 0))

    # -- reading -----------------------------------------------------------------------------

    def rows(self) -> list:
        """[(path names, stack_id, state, (kind, frame_id) or None, samples)], most samples first."""
        out = [(self.paths[p], s, st, self.awaits.get(a), n) for (p, s, st, a), n in self.counts.items()]
        out.sort(key=lambda r: -r[4])
        return out

    @property
    def samples(self) -> int:
        return sum(self.counts.values())

    def longest_lived(self, limit: int = 20) -> list:
        """[(task id, name, first s, last s, samples)], longest seen first."""
        lives = [(tid, name, first, last, n) for (tid, name), (first, last, n) in self.lifetimes.items()]
        lives.sort(key=lambda x: (-(x[3] - x[2]), -x[4]))
        return lives[:limit]

    def child_waits(self) -> set:
        """{(path_id, await_id)} of suspended tasks awaiting tasks of their own: a path seen with
        children (a longer path through it) awaiting through a ``CHILD_KINDS`` await, and any task
        awaiting a task object. That one's child may be missing from the samples: a pass keeps only
        the tasks two reads agree on, and a child started between them is left out while its parent,
        already suspended on it, is kept (CI saw asyncio's ``_accept_connection2`` listed as an await
        site of kind "task" that way)."""
        parents = {p[:-1] for p in self.paths.values() if len(p) > 1}
        return {
            (p, a)
            for (p, _s, state, a) in self.counts
            if state == AWAITING
            and a in self.awaits
            and self.awaits[a][0] in CHILD_KINDS
            and (self.awaits[a][0] == "task" or self.paths.get(p) in parents)
        }

    def own_samples(self) -> int:
        """Task samples less those of parents awaiting their children: what await shares are of."""
        child = self.child_waits()
        return sum(n for (p, _s, _st, a), n in self.counts.items() if (p, a) not in child)

    def await_sites(self) -> list:
        """[(kind, frame_id, samples)] of suspended tasks, by await site, most samples first; a
        parent's wait for its own children is the children's (``child_waits``), not a site of its own."""
        child = self.child_waits()
        by_site: dict = {}
        for (p, _s, state, a), n in self.counts.items():
            if state == AWAITING and a in self.awaits and (p, a) not in child:
                by_site[self.awaits[a]] = by_site.get(self.awaits[a], 0) + n
        return sorted(((k, f, n) for (k, f), n in by_site.items()), key=lambda x: -x[2])

    # -- save / load ---------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "passes": self.passes,
            "reads": self.reads,
            "counts": [[*key, n] for key, n in self.counts.items()],
            "paths": {str(k): list(v) for k, v in self.paths.items()},
            "awaits": {str(k): list(v) for k, v in self.awaits.items()},
            "lifetimes": [[tid, name, *life] for (tid, name), life in self.lifetimes.items()],
            "errors": dict(self.errors),
        }

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> Optional["TaskView"]:
        if data is None:
            return None
        try:
            view = cls()
            view.passes = int(data["passes"])
            view.reads = int(data.get("reads", view.passes))
            view.counts = {(int(p), int(s), int(st), int(a)): int(n) for p, s, st, a, n in data["counts"]}
            view.paths = {int(k): tuple(str(x) for x in v) for k, v in data["paths"].items()}
            view.awaits = {int(k): (str(v[0]), int(v[1])) for k, v in data["awaits"].items()}
            view.lifetimes = {(int(t), str(name)): [float(a), float(b), int(n)] for t, name, a, b, n in data["lifetimes"]}
            view.errors.update({k: int(v) for k, v in data.get("errors", {}).items()})
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError("tasks is not a task view {passes, counts, paths, awaits, lifetimes, errors}") from None
        if any(p not in view.paths or (a != NO_AWAIT and a not in view.awaits) for p, _s, _st, a in view.counts):
            raise ValueError("the task view's samples name a path or await site that is not in the recording")
        return view
