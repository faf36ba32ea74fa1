"""What the analyses read off a thread's runs, folded as the runs arrive at full resolution.

The runs kept for the timeline are coarsened on long recordings (``timeline.py``), so the
figures that need every run (GIL-wait episodes after a wake-up, wake-ups, idle samples per
syscall) are folded here from the sampler's runs before that, one thread at a time: a few
numbers per thread, whatever the duration. ``analysis/convoy.py`` defines what an episode is;
``RunFolds.feed`` applies that definition to runs in time order, one closed run at a time.

A thread's last run may still go on in the next batch, so it is held back (``pending``) and
only folded once closed; ``results()`` folds a copy of what is held back, leaving the fold as
it was, so a recording can be read while it goes on.
"""

from __future__ import annotations

import copy
from typing import Optional

from gilty.sampling.aggregate import ABSENT
from gilty.sampling.thread_states import IDLE, NATIVE, WAITING_GIL


class _Thread:
    """One thread's fold: the run held back, the last two closed runs, an open episode, the sums."""

    __slots__ = ("pending", "before", "after", "episode", "idle_end", "episodes", "wait_s", "waiting", "wakeups", "idle_syscalls")

    def __init__(self) -> None:
        # [first, passes, state, syscall, time of first pass, time of the pass after it or None]
        self.pending: Optional[list] = None
        self.before: Optional[tuple] = None  # (end pass + 1, state) of the closed run before `after`
        self.after: Optional[tuple] = None  # (end pass + 1, state) of the last closed run
        self.episode: Optional[list] = None  # [first, last, time of first, time after last or None]
        self.idle_end: Optional[int] = None  # pass after the last closed run if it was idle
        self.episodes = 0
        self.wait_s = 0.0
        self.waiting = 0  # waiting_gil passes inside episodes
        self.wakeups = 0
        self.idle_syscalls: dict = {}  # syscall -> idle passes, in the order first seen


class RunFolds:
    """Per thread: episodes, their wait and waiting passes, wake-ups, idle passes per syscall."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.threads: dict = {}  # tid -> _Thread, in the order first seen
        self.last_time: Optional[float] = None  # time of the last pass so far
        self.frozen: Optional[dict] = None  # results() of a loaded recording that kept no full runs

    # -- folding ----------------------------------------------------------------------------

    def add_batch(self, offset: int, times, cols, thread_slices) -> None:
        """One batch's runs (columns passes, state, stack, syscall; ``thread_slices`` as the sampler
        sends them, first passes counted from the batch) whose first pass is pass ``offset``."""
        if not len(times):
            return
        first_time = times[0]
        for th in self.threads.values():  # a run that ended with the last batch ends at this pass
            if th.pending is not None and th.pending[5] is None and th.pending[0] + th.pending[1] == offset:
                th.pending[5] = first_time
        n = len(times)
        passes, state, _stack, syscall = cols
        for tid, start, end, first in thread_slices:
            th = self.threads.get(tid)
            if th is None:
                th = self.threads[tid] = _Thread()
            p = offset + first
            for i in range(start, end):
                run_passes, run_state, nr = passes[i], state[i], syscall[i]
                local_end = p - offset + run_passes
                t_end = times[local_end] if local_end < n else None
                if run_state == IDLE:
                    th.idle_syscalls[nr] = th.idle_syscalls.get(nr, 0) + run_passes
                pend = th.pending
                if run_state == ABSENT:
                    pass
                elif pend is not None and pend[0] + pend[1] == p and pend[2] == run_state and pend[3] == nr:
                    pend[1] += run_passes
                    pend[5] = t_end
                else:
                    if pend is not None:
                        self._close(th, pend)
                    th.pending = [p, run_passes, run_state, nr, times[p - offset], t_end]
                p += run_passes
        self.last_time = times[-1]

    def _close(self, th: _Thread, run: list) -> None:
        """Folds a closed run, as ``convoy._episodes`` and ``convoy._wakeups`` read it."""
        first, passes, state, _nr, t_first, t_end = run
        last = first + passes - 1
        if th.idle_end == first and state != IDLE:
            th.wakeups += 1
        th.idle_end = first + passes if state == IDLE else None
        ep = th.episode
        if ep is not None:
            if state == WAITING_GIL and ep[1] + 1 == first:
                ep[1], ep[3] = last, t_end
                th.before, th.after = th.after, (last + 1, state)
                return
            self._end_episode(th)
        after, before = th.after, th.before
        if state == WAITING_GIL and after is not None and after[0] == first:
            woke_straight = after[1] == IDLE
            # Seen once running without the GIL between the blocking call and the wait (convoy.py).
            woke_via_native = after[1] == NATIVE and before is not None and before[1] == IDLE and before[0] == first - 1
            if woke_straight or woke_via_native:
                th.episode = [first, last, t_first, t_end]
        th.before, th.after = after, (last + 1, state)

    def _end_episode(self, th: _Thread) -> None:
        first, last, t_first, t_end = th.episode
        th.episode = None
        if t_end is None:  # still open when the recording ended: one nominal period for its last pass
            t_end = (self.last_time if self.last_time is not None else t_first) + self.period_s
        th.episodes += 1
        th.wait_s += t_end - t_first
        th.waiting += last - first + 1

    # -- reading ----------------------------------------------------------------------------

    def results(self) -> dict:
        """{"episodes": {tid: [episodes, wait s, waiting passes]}, "wakeups": {tid: n},
        "idle_syscalls": {tid: {syscall: passes}}}, as if the recording ended now."""
        if self.frozen is not None:
            return self.frozen
        episodes, wakeups, idle = {}, {}, {}
        for tid, th in self.threads.items():
            th = copy.deepcopy(th)
            if th.pending is not None:
                self._close(th, th.pending)
            if th.episode is not None:
                self._end_episode(th)
            episodes[tid] = [th.episodes, th.wait_s, th.waiting]
            wakeups[tid] = th.wakeups
            idle[tid] = dict(th.idle_syscalls)
        return {"episodes": episodes, "wakeups": wakeups, "idle_syscalls": idle}

    # -- save / load ------------------------------------------------------------------------

    def to_dict(self) -> dict:
        r = self.results()
        return {
            "episodes": {str(t): v for t, v in r["episodes"].items()},
            "wakeups": {str(t): v for t, v in r["wakeups"].items()},
            "idle_syscalls": {str(t): [[nr, n] for nr, n in v.items()] for t, v in r["idle_syscalls"].items()},
        }

    @classmethod
    def from_dict(cls, data, period_s: float) -> "RunFolds":
        """Saved results back (frozen), or ValueError (one line) if no recorder could have written them."""
        try:
            frozen = {
                "episodes": {int(t): [int(v[0]), float(v[1]), int(v[2])] for t, v in data["episodes"].items()},
                "wakeups": {int(t): int(v) for t, v in data["wakeups"].items()},
                "idle_syscalls": {int(t): {int(nr): int(n) for nr, n in v} for t, v in data["idle_syscalls"].items()},
            }
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            raise ValueError("timeline.folds is not {episodes, wakeups, idle_syscalls}") from None
        folds = cls(period_s)
        folds.frozen = frozen
        return folds
