"""`gilty serve`'s state: per-thread (or per-pool) state seconds of a process tree and per-process
GIL and GC figures, accumulated from the sampler's batches and then dropped (a sidecar runs for
weeks: nothing grows with time but the set of live processes and their thread names), and the
Prometheus text exposition of them."""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Optional

from gilty._visible import visible
from gilty.observe.monitor.memory_self import memory_self
from gilty.observe.series_keys import GENERIC, ThreadKeys, process_name, sticky_roles
from gilty.sampling.processes import roles_of
from gilty.sampling.session import STATE_NAMES, Session, TargetInfo

HOLD_STATES = ("holding_gil", "gc")


def _escape(value: str) -> str:
    """A label value: the target's name with every control, format or direction character written out
    (as the text outputs show it: ``curl .../metrics`` in a terminal must not act on a thread's name),
    then the text format's own escapes (backslash, double quote, newline)."""
    return visible(value, 0).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class ThreadTotals:
    __slots__ = ("name", "seconds")

    def __init__(self, name: str) -> None:
        self.name = name
        self.seconds = [0.0] * len(STATE_NAMES)


class ProcessTotals:
    """One sampled process: its labels and its GIL-held / in-GC passes, in total and over the
    last UTILISATION_WINDOW_S (the gauges)."""

    __slots__ = ("ppid", "cmdline", "name", "role", "held_s", "gc_s", "recent", "keys")

    def __init__(self, ppid: Optional[int], cmdline: str, max_series: int) -> None:
        self.ppid = ppid
        self.cmdline = cmdline
        self.name = process_name(cmdline)
        self.role = "main"
        self.held_s = 0.0
        self.gc_s = 0.0
        self.recent: deque = deque()  # (clock, passes, held passes, gc passes) per batch
        self.keys = ThreadKeys(max_series)


def live_tids(pid: int) -> Optional[set]:
    """The threads the kernel lists for ``pid`` now, or None when it cannot be read."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except (OSError, ValueError):
        return None


def smaps_memory(pid: int) -> Optional[dict]:
    return memory_self(f"/proc/{pid}/smaps_rollup")


class Totals:
    """Counters by (pid, thread key) for the live processes of the tree.

    By default a thread key is the thread's name, or its pool's (``ThreadKeys``), so threads that
    come and go under the same name, and pools whose threads are numbered, add no series; a process's
    series end when it exits. With ``per_thread`` the key is the tid (label ``tid`` added): those
    series end when the thread does (checked against the kernel's list at most once a second per
    process), so the count follows the live threads.
    """

    # Threads are checked against the kernel's list at most this often per process.
    PRUNE_INTERVAL_S = 1.0
    # The utilisation gauges cover this much of the recent past.
    UTILISATION_WINDOW_S = 10.0
    # Thread series per process at most (the rest are summed as "(other)").
    MAX_THREAD_SERIES = 64

    def __init__(
        self, period_s: float, threads_of=live_tids, clock=None, per_thread: bool = False, memory_of=smaps_memory
    ) -> None:
        import time

        self.period_s = period_s
        self.per_thread = per_thread
        self._threads_of = threads_of
        self._memory_of = memory_of
        self._clock = clock or time.monotonic
        self._pruned_at: dict = {}  # pid -> clock of the last check
        self.lock = threading.Lock()
        self.threads: dict = {}  # (pid, key) -> ThreadTotals; key is a tid or a thread key
        self.names: dict = {}  # (pid, tid) -> last name seen (batches name a thread once)
        self.processes: dict = {}  # pid -> ProcessTotals
        self.attaches = 0

    def attached(self, pid: int, cmdline: str, ppid: Optional[int] = None) -> None:
        with self.lock:
            self.processes[pid] = ProcessTotals(ppid or None, cmdline, self.MAX_THREAD_SERIES)
            self.attaches += 1
            self._update_roles()

    def _update_roles(self) -> None:
        procs = self.processes
        new = roles_of([(pid, p.ppid, p.cmdline) for pid, p in procs.items()])
        roles = sticky_roles({pid: p.role for pid, p in procs.items()}, new)
        for pid, p in procs.items():
            parent = procs.get(p.ppid) if p.ppid else None
            if p.name == GENERIC and parent is not None:
                p.name = parent.name
            # Retitled workers ("gunicorn: worker [app]" under a "gunicorn: master" title) and
            # multiprocessing's spawned ones differ from their parent's command line, not its name.
            p.role = "worker" if roles[pid] == "child" and parent is not None and p.name == parent.name else roles[pid]

    def exited(self, pid: int) -> None:
        with self.lock:
            self.processes.pop(pid, None)
            self._pruned_at.pop(pid, None)
            for table in (self.threads, self.names):
                for key in [k for k in table if k[0] == pid]:
                    del table[key]

    def prune(self, pid: int) -> None:
        """Forget the threads of ``pid`` that the kernel no longer lists (at most once a PRUNE_INTERVAL_S):
        their series with ``per_thread``, their names either way."""
        now = self._clock()
        if now - self._pruned_at.get(pid, -self.PRUNE_INTERVAL_S) < self.PRUNE_INTERVAL_S:
            return
        self._pruned_at[pid] = now
        live = self._threads_of(pid)
        if live is None:
            return  # unreadable (gone, or not ours): its exit event ends its series
        with self.lock:
            for key in [k for k in self.names if k[0] == pid and k[1] not in live]:
                del self.names[key]
            if self.per_thread:
                for key in [k for k in self.threads if k[0] == pid and k[1] not in live]:
                    del self.threads[key]

    def add(self, pid: int, batch: dict) -> None:
        """Fold one batch of one process in: every thread's samples per state, times the period."""
        window = Session(TargetInfo(pid, "", "", 0.0), 1.0 / self.period_s)
        window.add_batch(batch)
        counts: dict = {}
        for (tid, state, _stack), n in window.stack_counts().items():
            counts.setdefault(tid, [0] * len(STATE_NAMES))[state] += n
        now = self._clock()
        with self.lock:
            proc = self.processes.get(pid)
            if proc is not None:
                held, in_gc = window.passes_with_gil_held(), window.passes_in_gc()
                proc.held_s += held * self.period_s
                proc.gc_s += in_gc * self.period_s
                proc.recent.append((now, window.samples, held, in_gc))
                while proc.recent and proc.recent[0][0] < now - self.UTILISATION_WINDOW_S:
                    proc.recent.popleft()
            for tid, per_state in counts.items():
                name = window.thread_names.get(tid) or self.names.get((pid, tid)) or window.thread_name(tid)
                self.names[(pid, tid)] = name
                key = tid if self.per_thread or proc is None else self._thread_key(pid, proc, name)
                t = self.threads.get((pid, key))
                if t is None:
                    t = self.threads[(pid, key)] = ThreadTotals(name if self.per_thread else str(key))
                elif self.per_thread:
                    t.name = name
                for state, n in enumerate(per_state):
                    t.seconds[state] += n * self.period_s
        self.prune(pid)

    def _thread_key(self, pid: int, proc: ProcessTotals, name: str) -> str:
        key, folded = proc.keys.key(name)
        for old in folded:  # a pool just formed: its first members' series become the pool's
            t = self.threads.pop((pid, old), None)
            if t is not None:
                pool = self.threads.setdefault((pid, key), ThreadTotals(key))
                pool.seconds = [a + b for a, b in zip(pool.seconds, t.seconds)]
        return key

    def exposition(self) -> str:
        """Prometheus text format 0.0.4."""
        lines = []
        with self.lock:
            threads = sorted(self.threads.items(), key=lambda kv: (kv[0][0], str(kv[0][1])))
            processes = {pid: (p.role, p.name, p.held_s, p.gc_s, list(p.recent)) for pid, p in self.processes.items()}
            attaches = self.attaches
        memory = {pid: self._memory_of(pid) for pid in processes}

        def process_labels(pid: int) -> str:
            role, name = processes[pid][:2] if pid in processes else ("", "")
            return f'pid="{pid}",role="{role}",process="{_escape(name)}"'

        def labels(pid: int, key, t: ThreadTotals, extra: str = "") -> str:
            tid = f',tid="{key}"' if self.per_thread else ""
            return f'{process_labels(pid)},thread="{_escape(t.name)}"{tid}{extra}'

        lines += [
            "# HELP gilty_gil_hold_seconds_total Seconds the thread (or pool) held the GIL, collections included (sampled).",
            "# TYPE gilty_gil_hold_seconds_total counter",
        ]
        hold_codes = [STATE_NAMES.index(s) for s in HOLD_STATES]
        for (pid, key), t in threads:
            lines.append(f"gilty_gil_hold_seconds_total{{{labels(pid, key, t)}}} {sum(t.seconds[c] for c in hold_codes):.6f}")
        lines += [
            "# HELP gilty_gil_wait_seconds_total Seconds the thread (or pool) waited for the GIL (sampled).",
            "# TYPE gilty_gil_wait_seconds_total counter",
        ]
        wait_code = STATE_NAMES.index("waiting_gil")
        for (pid, key), t in threads:
            lines.append(f"gilty_gil_wait_seconds_total{{{labels(pid, key, t)}}} {t.seconds[wait_code]:.6f}")
        lines += [
            "# HELP gilty_thread_state_seconds_total Seconds the thread (or pool) spent in each state it was seen in (sampled).",
            "# TYPE gilty_thread_state_seconds_total counter",
        ]
        for (pid, key), t in threads:
            for code, state in enumerate(STATE_NAMES):
                if t.seconds[code] > 0:  # a state never seen adds no series
                    extra = ',state="' + state + '"'
                    lines.append(f"gilty_thread_state_seconds_total{{{labels(pid, key, t, extra)}}} {t.seconds[code]:.6f}")
        per_process = [
            ("gilty_process_up", "gauge", "A sampled Python process of the tree (1 while it is sampled).", lambda p: 1),
            (
                "gilty_process_gil_held_seconds_total",
                "counter",
                "Seconds some thread of the process held the GIL, collections included (sampled).",
                lambda p: processes[p][2],
            ),
            (
                "gilty_process_gc_seconds_total",
                "counter",
                "Seconds the process spent collecting garbage (sampled).",
                lambda p: processes[p][3],
            ),
            (
                "gilty_process_gil_utilisation_ratio",
                "gauge",
                f"Share of the last {self.UTILISATION_WINDOW_S:g} s in which some thread held the GIL.",
                lambda p: _share(processes[p][4], 2),
            ),
            (
                "gilty_process_gc_ratio",
                "gauge",
                f"Share of the last {self.UTILISATION_WINDOW_S:g} s spent collecting garbage.",
                lambda p: _share(processes[p][4], 3),
            ),
        ]
        for metric, kind, help_text, value in per_process:
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
            for pid in sorted(processes):
                figure = value(pid)
                lines.append(
                    f"{metric}{{{process_labels(pid)}}} {figure:.6f}"
                    if isinstance(figure, float)
                    else f"{metric}{{{process_labels(pid)}}} {figure}"
                )
        for field, metric, help_text in (
            ("private", "gilty_process_private_bytes", "Private memory of the process (smaps_rollup Private_*)."),
            (
                "shared",
                "gilty_process_shared_bytes",
                "Memory the process shares with others, e.g. a prefork master's pages (smaps_rollup Shared_*).",
            ),
        ):
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
            for pid in sorted(processes):
                if memory.get(pid) is not None:
                    lines.append(f"{metric}{{{process_labels(pid)}}} {memory[pid][field]}")
        lines += [
            "# HELP gilty_attaches_total Processes attached since the sidecar started (workers replaced, restarts).",
            "# TYPE gilty_attaches_total counter",
            f"gilty_attaches_total {attaches}",
        ]
        return "\n".join(lines) + "\n"


def _share(recent: list, column: int) -> float:
    passes = sum(r[1] for r in recent)
    return sum(r[column] for r in recent) / passes if passes else 0.0


def find_by_cmdline(cmdline: str, exclude: Optional[int] = None) -> Optional[int]:
    """The most recently started live process whose command line is ``cmdline`` (the restarted
    target, rather than an older one that happens to run the same command), or None."""
    best = None
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == exclude:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                text = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if text == cmdline and fields[0] != "Z":
            started = int(fields[19])
            if best is None or started > best[0]:
                best = (started, int(entry))
    return None if best is None else best[1]
