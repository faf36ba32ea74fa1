"""Convoys: threads that wake from a blocking call and then queue for the GIL.

A thread returning from I/O must take the GIL back; if a CPU-bound thread holds it, the
waker waits until the holder is asked to drop it, which takes up to one switch interval
(``sys.getswitchinterval()``, 5 ms by default). Each wake-up then costs about one interval:
the convoy effect. Here an *episode* is: the thread was idle in one pass and waiting_gil in
the next pass (or in the one after, if it was seen once running without the GIL in between,
as a woken thread often is before it reaches take_gil), through one or more consecutive
waiting_gil passes.

Episodes are read off the runs (``Session.runs()``): an idle run directly followed by a
waiting_gil run, or an idle run, a native run of exactly one pass, then a waiting_gil run; the
episode goes on through the waiting_gil runs that directly follow (a change of syscall while
waiting splits a run, not a wait). ``_episodes`` and ``_wakeups`` state that definition over a
list of runs; ``convoys()`` reads the same figures folded from every run as it was recorded
(``sampling/run_folds.py``), since a long recording keeps its runs coarsened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

from gilty.sampling.session import IDLE, NATIVE, WAITING_GIL, Session

CONVOY_MIN_EPISODES = 3
CONVOY_MIN_SWITCH_INTERVALS = 0.5
# A convoy is wake-ups turning into waits: at least this share of the thread's wake-ups seen (an idle
# run followed by another run of the thread) must be episodes. Two threads that only do short
# blocking calls meet on the GIL now and then: 3 one-pass episodes of 2.6 ms (the 500 Hz period, so
# 0.53 switch intervals) among hundreds of wake-ups were once read as a convoy on a quiet machine.
# A thread woken behind a CPU-bound holder waits on most of them (0.78-0.89 measured).
CONVOY_MIN_WAKE_SHARE = 0.2
# Below two samples per episode, a measured wait says more about the sampling period than
# about the wait itself (a 1 ms wait seen at 100 Hz shows up as one 10 ms sample).
RESOLVED_SAMPLES_PER_EPISODE = 2.0


@dataclass
class ConvoyStats:
    episodes: int
    waiting_samples: int  # waiting_gil samples inside episodes
    total_wait_s: float
    mean_wait_s: Optional[float]  # None without episodes
    switch_intervals: Optional[float]  # mean_wait_s / switch interval; None if either is unknown
    is_convoy: bool
    resolution_limited: bool  # mean wait is within the sampling resolution
    wakeups: int = 0  # idle runs followed by the thread in another state: the wake-ups the passes saw


def _episode_wait(times: list, first: int, last: int, period: float) -> float:
    """Wait of the episode made of passes first..last, measured on the actual timestamps.

    The wait began between passes first-1 and first and ended between last and last+1, so
    on average it lasted from ``times[first]`` to ``times[last + 1]`` (= n periods when
    sampling is on time). An episode still open at the end gets one nominal period for its
    last pass.
    """
    if last + 1 < len(times):
        return times[last + 1] - times[first]
    return times[last] - times[first] + period


def _episodes(runs) -> Iterator[tuple]:
    """(tid, first pass, last pass) of each episode, from runs sorted by (tid, first_pass)."""
    # The previous runs of the same thread: (tid, end pass + 1, state) of the last two.
    before = after = None
    open_episode = None  # [tid, first, last] while waiting_gil runs keep following each other
    for tid, first, passes, state, _stack_id, _nr in runs:
        last = first + passes - 1
        if open_episode is not None:
            if open_episode[0] == tid and state == WAITING_GIL and open_episode[2] + 1 == first:
                open_episode[2] = last
                before, after = after, (tid, last + 1, state)
                continue
            yield tuple(open_episode)
            open_episode = None
        if state == WAITING_GIL and after is not None and after[0] == tid and after[1] == first:
            woke_straight = after[2] == IDLE
            # A thread just woken from its blocking call may be seen once running without the GIL
            # (not yet on a CPU, or on its way into take_gil) before it waits. The native run is
            # one pass exactly when the idle run ends right before it.
            woke_via_native = (
                after[2] == NATIVE and before is not None and before[0] == tid and before[2] == IDLE and before[1] == first - 1
            )
            if woke_straight or woke_via_native:
                open_episode = [tid, first, last]
        before, after = after, (tid, last + 1, state)
    if open_episode is not None:
        yield tuple(open_episode)


def convoys(session: Session, switch_interval_s: Optional[float] = None) -> dict:
    """{tid: ConvoyStats} for every thread with samples."""
    switch = session.target.switch_interval_s if switch_interval_s is None else switch_interval_s
    # Per thread [episodes, total wait s, waiting samples inside episodes], folded off every run as
    # it was recorded (``sampling/run_folds.py``: the same episodes as ``_episodes`` reads off the
    # runs), since a long recording's timeline keeps coarsened runs only.
    folded = session.folds.results()
    totals: dict = {tid: [0, 0, 0] for tid in session.tids()}
    for tid, entry in folded["episodes"].items():
        if entry[0]:
            totals[tid] = list(entry)
    wakeups = folded["wakeups"]
    result = {}
    for tid, (episodes, total, n_samples) in totals.items():
        mean = total / episodes if episodes else None
        ratio = mean / switch if mean is not None and switch and switch > 0 else None
        woke = max(wakeups.get(tid, 0), episodes)  # each episode begins with a wake-up
        result[tid] = ConvoyStats(
            episodes=episodes,
            waiting_samples=n_samples,
            total_wait_s=total,
            mean_wait_s=mean,
            switch_intervals=ratio,
            is_convoy=(
                ratio is not None
                and episodes >= CONVOY_MIN_EPISODES
                and ratio >= CONVOY_MIN_SWITCH_INTERVALS
                and episodes >= CONVOY_MIN_WAKE_SHARE * woke
            ),
            resolution_limited=episodes > 0 and n_samples / episodes < RESOLVED_SAMPLES_PER_EPISODE,
            wakeups=woke,
        )
    return result


def _wakeups(runs) -> dict:
    """{tid: idle runs directly followed by a run of the same thread in another state}."""
    out: dict = {}
    idle_end = None  # (tid, pass after the idle run)
    for tid, first, passes, state, _stack_id, _nr in runs:
        if idle_end == (tid, first) and state != IDLE:
            out[tid] = out.get(tid, 0) + 1
        idle_end = (tid, first + passes) if state == IDLE else None
    return out
