"""What ``gilty memory`` measured: one record per process of the tree, fed by the batches of
``_native.MemoryMonitor.collect()`` (the batch format is described in docs/memory.md)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Optional

from gilty.sampling import helpers as helper_kinds

# Memory fields of a sample, in bytes (minflt / majflt are counts).
SAMPLE_FIELDS = (
    "rss",
    "pss",
    "uss",
    "shared_clean",
    "shared_dirty",
    "private_clean",
    "private_dirty",
    "anonymous",
    "swap",
    "minflt",
    "majflt",
)


@dataclass
class ProcessRecord:
    """One process of the tree and everything measured about it."""

    pid: int
    ppid: int
    role: str  # "master" | "worker" | "helper"
    cmdline: str = ""
    first_seen: float = 0.0
    exited: Optional[float] = None
    python: Optional[str] = None
    gc_note: Optional[str] = None
    # Page baseline: {"t", "present_bytes", "shared_bytes", "mappings", "scan_s", "method"} or None.
    baseline: Optional[dict] = None
    # {"pass", "t", SAMPLE_FIELDS..., "gc": {...} | None, "cost": {...}}
    samples: list = field(default_factory=list)
    # {"t", "reason", "gc_bytes", "outside_bytes", "ambiguous_bytes", "released_bytes", "sole_bytes", "minflt", "scan_s", "pages_read"}
    cow_steps: list = field(default_factory=list)
    # {"start", "end", "generation", "polls"}
    gc_windows: list = field(default_factory=list)
    # {"t", "reason", "enabled", "thresholds", "counts", "collections", "frozen_empty", "frozen_objects", "frozen_exact", ...}
    gc_snapshots: list = field(default_factory=list)
    # Against the parent since fork, when found and at the end: {"t", "when", "parent", "share": {...} | None,
    # "modules": [names] | None}
    fork_facts: list = field(default_factory=list)
    # Why a child is a helper, not a worker (a router, a resource tracker): gilty.sampling.helpers.
    helper: Optional[str] = None
    # The latest /proc facts it was told apart by (kept for processes that exit before the end).
    proc_facts: Any = None

    @property
    def is_python(self) -> bool:
        return self.python is not None


class MemorySession:
    """A ``gilty memory`` run: the tree below ``master_pid`` measured every ``interval_s``."""

    def __init__(
        self,
        master_pid: int,
        interval_s: float,
        gc_poll_s: float,
        requested_duration_s: Optional[float] = None,
        start_time: Optional[str] = None,
    ) -> None:
        self.master_pid = master_pid
        self.interval_s = interval_s
        self.gc_poll_s = gc_poll_s
        self.requested_duration_s = requested_duration_s
        self.start_time = start_time or datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds")
        self.processes: dict = {}
        self.notes: list = []
        self.master_exited: Optional[float] = None
        self.duration_s = 0.0
        self.stats: dict = {}
        self.partial = False
        self.partial_reason: Optional[str] = None
        self.stopped_by = "duration"
        # `_native.FaultWatch.stop()`'s result with --faults (gilty.memory.faults reads it), else None.
        self.faults: Optional[dict] = None

    # -- feeding ------------------------------------------------------------------------------

    def _process(self, pid: int) -> ProcessRecord:
        rec = self.processes.get(pid)
        if rec is None:
            role = "master" if pid == self.master_pid else "worker"
            rec = self.processes[pid] = ProcessRecord(pid=pid, ppid=0, role=role)
        return rec

    def add_batch(self, batch: dict) -> None:
        """Merge one ``MemoryMonitor.collect()`` result."""
        new = any(p["pid"] not in self.processes for p in batch.get("processes", ()))
        for p in batch.get("processes", ()):
            rec = self._process(p["pid"])
            rec.ppid = p.get("ppid", rec.ppid)
            rec.role = "helper" if rec.helper else p.get("role", rec.role)
            rec.cmdline = p.get("cmdline", rec.cmdline)
            rec.first_seen = p.get("first_seen", rec.first_seen)
            rec.exited = p.get("exited", rec.exited)
            rec.python = p.get("python", rec.python)
            rec.gc_note = p.get("gc_note", rec.gc_note)
            if p.get("baseline") is not None:
                rec.baseline = p["baseline"]
        for s in batch.get("samples", ()):
            self._process(s["pid"]).samples.append(s)
        for s in batch.get("cow_steps", ()):
            self._process(s["pid"]).cow_steps.append(s)
        for w in batch.get("gc_windows", ()):
            self._process(w["pid"]).gc_windows.append(w)
        for g in batch.get("gc_snapshots", ()):
            self._process(g["pid"]).gc_snapshots.append(g)
        for f in batch.get("fork_facts", ()):
            self._process(f["pid"]).fork_facts.append(f)
        self.notes.extend(batch.get("notes", ()))
        if new:
            self.classify()
        if batch.get("master_exited") is not None:
            self.master_exited = batch["master_exited"]

    def classify(self) -> None:
        """Tell the helpers among the master's children from its workers, from /proc now (the facts of a
        process that has exited are the last ones read). Called when processes appear and at the end."""
        live = [r.pid for r in self.processes.values() if r.exited is None]
        for pid, facts in helper_kinds.read_all(live).items():
            rec = self.processes[pid]
            if pid == self.master_pid or facts.ppid == rec.ppid:  # not a reused pid
                rec.proc_facts = facts
        facts = {r.pid: r.proc_facts for r in self.processes.values() if r.proc_facts is not None}
        found = helper_kinds.helpers(facts, roots=(self.master_pid,))
        for rec in self.processes.values():
            if rec.pid == self.master_pid:
                continue
            rec.helper = found.get(rec.pid)
            if rec.helper:
                rec.role = "helper"
            elif rec.role == "helper":
                rec.role = "worker"

    def finish(self, stats: dict, duration_s: float, stopped_by: str) -> None:
        self.classify()
        self.stats = dict(stats)
        self.duration_s = duration_s
        self.stopped_by = stopped_by

    def mark_partial(self, reason: str) -> None:
        self.partial = True
        self.partial_reason = reason

    # -- views --------------------------------------------------------------------------------

    @property
    def master(self) -> Optional[ProcessRecord]:
        return self.processes.get(self.master_pid)

    @property
    def workers(self) -> list:
        return sorted((p for p in self.processes.values() if p.role == "worker"), key=lambda p: (p.first_seen, p.pid))

    @property
    def helpers(self) -> list:
        """Children that serve no request (a router, a resource tracker): kept out of worker figures."""
        return sorted((p for p in self.processes.values() if p.role == "helper"), key=lambda p: (p.first_seen, p.pid))

    def ordered(self) -> list:
        """Master first, then workers in the order they were found, then helpers."""
        master = [self.master] if self.master is not None else []
        return master + self.workers + self.helpers

    def cow_method(self) -> Optional[str]:
        methods = {p.baseline["method"] for p in self.processes.values() if p.baseline}
        if not methods:
            return None
        return sorted(methods)[0] if len(methods) == 1 else "mixed:" + ",".join(sorted(methods))


def first_gc_state(rec: ProcessRecord) -> Optional[dict]:
    """The first GC reading of a process (snapshot at discovery, else its first sample's)."""
    for snap in rec.gc_snapshots:
        return snap
    for s in rec.samples:
        if s.get("gc"):
            return s["gc"]
    return None


def last_gc_state(rec: ProcessRecord) -> Optional[dict]:
    """The latest GC reading (a sample's, which is newer than any snapshot before it)."""
    best: Any = None
    best_t = -1.0
    for s in rec.samples:
        if s.get("gc") and s["t"] >= best_t:
            best, best_t = s["gc"], s["t"]
    for snap in rec.gc_snapshots:
        if snap["t"] >= best_t:
            best, best_t = snap, snap["t"]
    return best


def last_frozen(rec: ProcessRecord) -> Optional[dict]:
    """{"objects", "exact", "empty"} from the latest snapshot (samples carry only emptiness)."""
    if not rec.gc_snapshots:
        return None
    snap = rec.gc_snapshots[-1]
    state = last_gc_state(rec) or snap
    return {
        "objects": snap["frozen_objects"],
        "exact": snap["frozen_exact"],
        "empty": state.get("frozen_empty", snap["frozen_empty"]),
    }


def last_fork_share(rec: ProcessRecord) -> Optional[dict]:
    """The latest page comparison of a process with its parent (None: not a worker, or unreadable)."""
    for f in reversed(rec.fork_facts):
        if f.get("share"):
            return dict(f["share"], t=f["t"])
    return None


def last_modules(rec: ProcessRecord) -> Optional[list]:
    """The latest ``sys.modules`` names read from a process (None: not read)."""
    for f in reversed(rec.fork_facts):
        if f.get("modules") is not None:
            return f["modules"]
    return None
