"""Convoys: threads that wake from a blocking call and then queue for the GIL.

A thread returning from I/O must take the GIL back; if a CPU-bound thread holds it, the
waker waits until the holder is asked to drop it, which takes up to one switch interval
(``sys.getswitchinterval()``, 5 ms by default). Each wake-up then costs about one interval:
the convoy effect. Here an *episode* is: the thread was idle in one pass and waiting_gil in
the next pass (or in the one after, if it was seen once running without the GIL in between,
as a woken thread often is before it reaches take_gil), through one or more consecutive
waiting_gil passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gilty.session import IDLE, NATIVE, WAITING_GIL, Session

# Marks, in the scan below, a native pass that directly follows an idle one.
WAKING = -1

CONVOY_MIN_EPISODES = 3
CONVOY_MIN_SWITCH_INTERVALS = 0.5
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


def convoys(session: Session, switch_interval_s: Optional[float] = None) -> dict:
    """{tid: ConvoyStats} for every thread with samples.

    Relies on rows being in sample order (``Session.add_batch`` keeps them so).
    """
    switch = session.target.switch_interval_s if switch_interval_s is None else switch_interval_s
    times = session.times
    period = session.period_s
    # Per thread: (previous sample index, previous state, start of the open episode or -1).
    last: dict = {}
    waits: dict = {}  # tid -> [wait_s, ...]
    sample_counts: dict = {}  # tid -> waiting samples inside episodes
    for s, tid, state in zip(session.row_sample, session.row_tid, session.row_state):
        previous = last.get(tid)
        if previous is None:
            last[tid] = (s, state, -1)
            waits.setdefault(tid, [])
            continue
        prev_s, prev_state, start = previous
        consecutive = s == prev_s + 1
        if start >= 0:
            if state == WAITING_GIL and consecutive:
                last[tid] = (s, state, start)
                continue
            waits[tid].append(_episode_wait(times, start, prev_s, period))
            sample_counts[tid] = sample_counts.get(tid, 0) + prev_s - start + 1
            start = -1
        if state == WAITING_GIL and prev_state in (IDLE, WAKING) and consecutive:
            start = s
        # A thread just woken from its blocking call may be seen once running without the GIL (not
        # yet on a CPU, or on its way into take_gil) before it waits: that pass keeps it "waking".
        elif state == NATIVE and prev_state == IDLE and consecutive:
            state = WAKING
        last[tid] = (s, state, start)
    for tid, (prev_s, _state, start) in last.items():
        if start >= 0:
            waits[tid].append(_episode_wait(times, start, prev_s, period))
            sample_counts[tid] = sample_counts.get(tid, 0) + prev_s - start + 1

    result = {}
    for tid, episode_waits in waits.items():
        episodes = len(episode_waits)
        total = sum(episode_waits)
        mean = total / episodes if episodes else None
        ratio = mean / switch if mean is not None and switch and switch > 0 else None
        n_samples = sample_counts.get(tid, 0)
        result[tid] = ConvoyStats(
            episodes=episodes,
            waiting_samples=n_samples,
            total_wait_s=total,
            mean_wait_s=mean,
            switch_intervals=ratio,
            is_convoy=ratio is not None and episodes >= CONVOY_MIN_EPISODES and ratio >= CONVOY_MIN_SWITCH_INTERVALS,
            resolution_limited=episodes > 0 and n_samples / episodes < RESOLVED_SAMPLES_PER_EPISODE,
        )
    return result
