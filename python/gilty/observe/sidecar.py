"""`gilty serve`'s state: per-thread state seconds of a process tree, accumulated from the sampler's
batches and then dropped (a sidecar runs for weeks: nothing grows with time but the set of live
threads), and the Prometheus text exposition of them."""

from __future__ import annotations

import os
import threading
from typing import Optional

from gilty.sampling.session import STATE_NAMES, Session, TargetInfo

HOLD_STATES = ("holding_gil", "gc")


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class ThreadTotals:
    __slots__ = ("name", "seconds")

    def __init__(self, name: str) -> None:
        self.name = name
        self.seconds = [0.0] * len(STATE_NAMES)


def live_tids(pid: int) -> Optional[set]:
    """The threads the kernel lists for ``pid`` now, or None when it cannot be read."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except (OSError, ValueError):
        return None


class Totals:
    """Counters by (pid, tid); threads that exited and threads of exited processes are forgotten
    (their series end), so a sidecar on a server that starts and ends threads or workers all week
    keeps as many series as there are live threads."""

    # Threads are checked against the kernel's list at most this often per process.
    PRUNE_INTERVAL_S = 1.0

    def __init__(self, period_s: float, threads_of=live_tids, clock=None) -> None:
        import time

        self.period_s = period_s
        self._threads_of = threads_of
        self._clock = clock or time.monotonic
        self._pruned_at: dict = {}  # pid -> clock of the last check
        self.lock = threading.Lock()
        self.threads: dict = {}  # (pid, tid) -> ThreadTotals
        self.processes: dict = {}  # pid -> cmdline
        self.attaches = 0

    def attached(self, pid: int, cmdline: str) -> None:
        with self.lock:
            self.processes[pid] = cmdline
            self.attaches += 1

    def exited(self, pid: int) -> None:
        with self.lock:
            self.processes.pop(pid, None)
            self._pruned_at.pop(pid, None)
            for key in [k for k in self.threads if k[0] == pid]:
                del self.threads[key]

    def prune(self, pid: int) -> None:
        """Forget the threads of ``pid`` that the kernel no longer lists (at most once a PRUNE_INTERVAL_S)."""
        now = self._clock()
        if now - self._pruned_at.get(pid, -self.PRUNE_INTERVAL_S) < self.PRUNE_INTERVAL_S:
            return
        self._pruned_at[pid] = now
        live = self._threads_of(pid)
        if live is None:
            return  # unreadable (gone, or not ours): its exit event ends its series
        with self.lock:
            for key in [k for k in self.threads if k[0] == pid and k[1] not in live]:
                del self.threads[key]

    def add(self, pid: int, batch: dict) -> None:
        """Fold one batch of one process in: every thread's samples per state, times the period."""
        window = Session(TargetInfo(pid, "", "", 0.0), 1.0 / self.period_s)
        window.add_batch(batch)
        counts: dict = {}
        for (tid, state, _stack), n in window.stack_counts().items():
            counts.setdefault(tid, [0] * len(STATE_NAMES))[state] += n
        with self.lock:
            for tid, per_state in counts.items():
                t = self.threads.get((pid, tid))
                if t is None:
                    t = self.threads[(pid, tid)] = ThreadTotals(window.thread_name(tid))
                elif tid in window.thread_names:
                    t.name = window.thread_names[tid]
                for state, n in enumerate(per_state):
                    t.seconds[state] += n * self.period_s
        self.prune(pid)

    def exposition(self) -> str:
        """Prometheus text format 0.0.4."""
        lines = []
        with self.lock:
            threads = sorted(self.threads.items())
            processes = dict(self.processes)
            attaches = self.attaches

        def labels(pid: int, tid: int, name: str, extra: str = "") -> str:
            return f'pid="{pid}",thread="{_escape(name)}",tid="{tid}"{extra}'

        lines += ["# HELP gilty_gil_hold_seconds_total Seconds the thread held the GIL, collections included (sampled).",
                  "# TYPE gilty_gil_hold_seconds_total counter"]
        hold_codes = [STATE_NAMES.index(s) for s in HOLD_STATES]
        for (pid, tid), t in threads:
            lines.append(f"gilty_gil_hold_seconds_total{{{labels(pid, tid, t.name)}}} {sum(t.seconds[c] for c in hold_codes):.6f}")
        lines += ["# HELP gilty_gil_wait_seconds_total Seconds the thread waited for the GIL (sampled).",
                  "# TYPE gilty_gil_wait_seconds_total counter"]
        wait_code = STATE_NAMES.index("waiting_gil")
        for (pid, tid), t in threads:
            lines.append(f"gilty_gil_wait_seconds_total{{{labels(pid, tid, t.name)}}} {t.seconds[wait_code]:.6f}")
        lines += ["# HELP gilty_thread_state_seconds_total Seconds the thread spent in each state (sampled).",
                  "# TYPE gilty_thread_state_seconds_total counter"]
        for (pid, tid), t in threads:
            for code, state in enumerate(STATE_NAMES):
                extra = ',state="' + state + '"'
                lines.append(f"gilty_thread_state_seconds_total{{{labels(pid, tid, t.name, extra)}}} {t.seconds[code]:.6f}")
        lines += ["# HELP gilty_process_up A sampled Python process of the tree (1 while it is sampled).",
                  "# TYPE gilty_process_up gauge"]
        for pid, cmdline in sorted(processes.items()):
            lines.append(f'gilty_process_up{{pid="{pid}",cmdline="{_escape(cmdline[:200])}"}} 1')
        lines += ["# HELP gilty_attaches_total Processes attached since the sidecar started (workers replaced, restarts).",
                  "# TYPE gilty_attaches_total counter", f"gilty_attaches_total {attaches}"]
        return "\n".join(lines) + "\n"


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
