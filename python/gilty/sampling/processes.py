"""Several processes in one recording (``--subprocesses``, several ``--pid``): turning what
``_native.ProcessSet.collect()`` returns into a ``Recording`` with one ``Session`` per process,
the roles shown in reports, and the hint that busy Python children were left out.
"""

from __future__ import annotations

import os
import re
import time
from typing import Callable, Optional, TextIO

from gilty._visible import visible
from gilty.sampling import capture, helpers
from gilty.sampling.session import Recording, Session, TargetInfo


class ProcessTracker:
    """Applies ``ProcessSet.collect()`` results to a Recording: sessions appear on "attached",
    get their batches, and are marked on "exited"; skipped pids are said once on ``err``."""

    def __init__(
        self,
        recording: Recording,
        syscall_name: Optional[Callable[[int], str]] = None,
        err: Optional[TextIO] = None,
    ) -> None:
        self.recording = recording
        self.syscall_name = syscall_name
        self.err = err
        self.passes = 0  # sampling passes seen, over all processes (for "nothing recorded")

    def add(self, collected: dict) -> None:
        rec = self.recording
        # Events first: a process attached in this call already has its batch here.
        for event in collected["events"]:
            kind, pid = event["kind"], event["pid"]
            if kind == "attached":
                target = TargetInfo(
                    pid=pid,
                    python_version=event["python_version"],
                    executable=event["executable"],
                    switch_interval_s=event["switch_interval_s"],
                    cmdline=event["cmdline"],
                    ppid=event["ppid"] or None,
                )
                session = Session(target, rec.rate_hz, rec.start_time)
                session.command = rec.command
                rec.sessions.append(session)
            elif kind == "exited":
                session = rec.session(pid)
                if session is not None:
                    session.exited = True
                    session.exited_at = event["t"]
            elif kind == "skipped":
                rec.skipped.append({k: event[k] for k in ("pid", "ppid", "t", "reason")})
                if self.err is not None:
                    # The reason names the process's executable, which any descendant chooses.
                    print(f"gilty: skipping pid {pid}: {visible(event['reason'], 0)}", file=self.err)
        for pid, batch in collected["batches"].items():
            session = rec.session(pid)
            if session is not None:
                session.add_batch(batch, self.syscall_name)
                self.passes += len(batch["times"])

    def finish(self, duration_s: float, stopped_by: str) -> None:
        rec = self.recording
        # No further than the last pass (see record_run.sample_until_stopped): time a busy host kept gilty
        # from looking, before it saw the end, was not recorded.
        covered = [s.last_time + s.period_s for s in rec.sessions if s.last_time is not None]
        if covered:
            duration_s = min(duration_s, max(covered))
        rec.duration_s = duration_s
        rec.stopped_by = stopped_by
        # Read while the processes still run: a helper is told from its siblings by what /proc shows.
        pids = {x.target.pid for x in rec.sessions}
        roots = tuple(x.target.pid for x in rec.sessions if x.target.ppid not in pids)
        rec.helpers = helpers.helpers(helpers.read_all(x.target.pid for x in rec.sessions if not x.exited), roots)
        for s in rec.sessions:
            first = s.times[0] if s.times else 0.0
            end = s.exited_at if s.exited_at is not None else duration_s
            if s.last_time is not None:
                end = min(end, s.last_time + s.period_s)
            s.duration_s = max(end - first, 0.0)
            s.stopped_by = "target_exit" if s.exited else stopped_by


# -- roles -----------------------------------------------------------------------------------


def roles(recording: Recording) -> dict:
    """{pid: "master" | "worker" | "helper" | "child" | "main"} where the tree makes it obvious (``roles_of``);
    a helper (a router, a resource tracker) was told from the workers while the recording ran."""
    out = roles_of([(s.target.pid, s.target.ppid, s.target.cmdline) for s in recording.sessions])
    for pid in getattr(recording, "helpers", None) or ():
        if out.get(pid) in ("worker", "child"):
            out[pid] = "helper"
    return out


_DIGITS = re.compile(r"\d+")
# The command line of a child started by multiprocessing's spawn method: it runs its parent's code.
_SPAWNED = "from multiprocessing.spawn import spawn_main"


def roles_of(members: list) -> dict:
    """Roles of (pid, ppid, cmdline) triples: a process with a listed child is a master; a child with
    its parent's or a sibling's command line (a forked worker, a pool of workers) is a worker; any
    other child is a child; the rest are main. ``gilty serve`` uses it without a Recording."""
    by_pid = {pid: (ppid, cmdline) for pid, ppid, cmdline in members}
    parents = {ppid for ppid, _ in by_pid.values()}
    # Spawned workers differ only in numbers (multiprocessing's `spawn_main(tracker_fd=5, pipe_handle=9)`
    # under uvicorn --workers or a spawn Pool), so siblings are compared with their numbers masked.
    shape = {pid: _DIGITS.sub("#", cmdline or "") for pid, (_pp, cmdline) in by_pid.items()}
    out = {}
    for pid, (ppid, cmdline) in by_pid.items():
        parent = by_pid.get(ppid) if ppid else None
        if pid in parents:
            out[pid] = "master"
        elif parent is not None:
            same = bool(cmdline) and cmdline == parent[1]
            twins = bool(cmdline) and any(p != pid and pp == ppid and shape[p] == shape[pid] for p, (pp, _c) in by_pid.items())
            spawned = bool(cmdline) and _SPAWNED in cmdline
            out[pid] = "worker" if same or twins or spawned else "child"
        else:
            out[pid] = "main"
    return out


# -- the "use --subprocesses" hint -------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# "Mostly idle while its Python children are busy": the process used under this share of one CPU
# while its Python descendants together used at least HINT_CHILDREN_MIN of one, and over 3 times as much.
HINT_PARENT_MAX = 0.2
HINT_CHILDREN_MIN = 0.2


def _stat(pid: int) -> Optional[tuple]:
    """(ppid, starttime, utime + stime in s) from /proc/PID/stat, or None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is field 3 (state): ppid is 4, utime 14, stime 15, starttime 22.
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def _is_python(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python")
    except OSError:
        return False


def _python_descendants(root: int) -> dict:
    """{pid: (starttime, cpu_s)} of ``root``'s descendants whose executable is a python."""
    parent_of = {}
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                parent_of[int(entry)] = st[0]
                stats[int(entry)] = st
    out = {}
    for pid in stats:
        p, hops = parent_of.get(pid), 0
        while p and p != root and hops < 64:
            p, hops = parent_of.get(p), hops + 1
        if p == root and _is_python(pid):
            out[pid] = (stats[pid][1], stats[pid][2])
    return out


class ChildrenCpu:
    """CPU time of a process and of its Python descendants while a recording runs.

    Reads only /proc/PID/stat (no attaching), so it is cheap enough to run beside any recording.
    ``poll()`` between chunks keeps the last CPU time of children that exit before the end (a
    worker replaced after --max-requests); ``hint()`` at the end compares the totals.
    """

    POLL_EVERY_S = 0.5

    def __init__(self, pid: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.pid = pid
        self.clock = clock
        own = _stat(pid)
        self.own_start = own[2] if own else 0.0
        # (pid, starttime) -> [cpu when first seen, cpu when last seen]
        self.children: dict = {}
        self._last_poll = -1e9
        self.poll(force=True, baseline=True)

    def poll(self, force: bool = False, baseline: bool = False) -> None:
        now = self.clock()
        if not force and now - self._last_poll < self.POLL_EVERY_S:
            return
        self._last_poll = now
        for pid, (start, cpu) in _python_descendants(self.pid).items():
            seen = self.children.get((pid, start))
            if seen is None:
                # Born during the recording: all its CPU time is within it.
                self.children[(pid, start)] = [cpu if baseline else 0.0, cpu]
            else:
                seen[1] = cpu

    def hint(self, wall_s: float) -> Optional[str]:
        """The one-line hint, or None when the children were not busier than the process."""
        self.poll(force=True)
        if wall_s <= 0:
            return None
        own = _stat(self.pid)
        own_share = ((own[2] if own else self.own_start) - self.own_start) / wall_s
        used = [last - first for first, last in self.children.values() if last > first]
        children_share = sum(used) / wall_s
        count = len(used)
        if own_share < HINT_PARENT_MAX and children_share >= HINT_CHILDREN_MIN and children_share > 3 * own_share:
            return (
                f"pid {self.pid} was mostly idle ({own_share:.0%} of a CPU) while {count} Python child "
                f"process{'es' if count != 1 else ''} used {children_share:.0%}: "
                f"add --subprocesses to record them too"
            )
        return None


# -- the sampling loop -------------------------------------------------------------------------


def sample_processes(
    tracker: ProcessTracker,
    process_set: object,
    duration_s: Optional[float],
    stop: object,
    clock: Callable[[], float] = time.monotonic,
    on_slice: Optional[Callable[[], None]] = None,
    progress: Optional[capture.Progress] = None,
    tally: Optional[Callable[[], tuple]] = None,
) -> str:
    """Collect until the duration, every process gone, or ``stop.requested`` (gilty.sampling.capture's
    loop), then ``tracker.finish``; returns what stopped it."""

    def step(seconds: float) -> bool:
        got = process_set.collect(seconds)  # type: ignore[attr-defined]
        tracker.add(got)
        if on_slice is not None:
            on_slice()
        return bool(got["finished"])

    period_s = 1.0 / tracker.recording.rate_hz
    ended = capture.collect_until(step, period_s, duration_s, stop, clock, progress=progress, tally=tally)
    tracker.finish(ended.wall_s, ended.stopped_by)
    return ended.stopped_by
