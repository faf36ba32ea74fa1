"""The native aggregation against its pure-Python twin (``gilty.sampling.aggregate``) on a real recording.

The native sampler keeps no per-(pass, thread) rows, so the twin cannot be fed the very same rows.
What the runs say is exact, though: every thread's state and syscall in every pass. So the
recording's runs are expanded back into rows, folded once more by the twin in a single batch, and
the result must match what the native side produced over many short batches: the same runs (so
runs going on across batch boundaries were merged, and only those), the same pass flags, the same
blame per (waiter, holder) and sample counts consistent with the runs.
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from conftest import start_target
from gilty import _native
from gilty.sampling.aggregate import PASS_HOLDER_CPU_WAIT, aggregate_rows
from gilty.sampling.session import GC, HOLDING_GIL, WAITING_GIL, Session, TargetInfo
from gilty.sampling.thread_states import CPU_WAIT

pytestmark = pytest.mark.alone

RATE_HZ = 500
# Short batches, so that many runs cross a batch boundary.
CHUNK_S = 0.05
DURATION_S = 2.0


@pytest.fixture(scope="module")
def recording():
    # cpu_and_io: two threads sleeping 10 ms in a loop beside a CPU-bound one: every state but GC,
    # and many short runs. The aggregation does not depend on the interpreter version.
    proc = start_target(sys.executable, "cpu_and_io_threads.py")
    try:
        target = _native.Target(proc.pid)
        session = Session(TargetInfo.from_native(target), RATE_HZ)
        sampler = _native.Sampler(target, RATE_HZ)
        batches = 0
        while session.samples < DURATION_S * RATE_HZ * 0.5 and batches < DURATION_S / CHUNK_S * 3:
            session.add_batch(sampler.collect(CHUNK_S), _native.syscall_name)
            batches += 1
    finally:
        proc.stop()
    assert session.samples > 100, "too few passes to compare anything"
    return session


def expand(session: Session) -> dict:
    """{(pass, tid): (state, stack_id, syscall)} from the runs; fails on overlapping runs."""
    grid = {}
    for tid, first, passes, state, stack_id, nr in session.runs():
        for p in range(first, first + passes):
            assert (p, tid) not in grid, f"two runs of tid {tid} cover pass {p}"
            grid[(p, tid)] = (state, stack_id, nr)
    return grid


def test_runs_cover_every_sample_once_and_are_maximal(recording):
    grid = expand(recording)
    assert max(p for p, _tid in grid) < recording.samples
    per_thread_state = Counter()
    for (_p, tid), (state, _stack, _nr) in grid.items():
        per_thread_state[(tid, state)] += 1
    from_counts = Counter()
    for (tid, state, _stack), n in recording.stack_counts().items():
        from_counts[(tid, state)] += n
    assert per_thread_state == from_counts
    runs = recording.runs()
    for a, b in zip(runs, runs[1:]):
        continues = a[0] == b[0] and a[1] + a[2] == b[1] and a[3] == b[3] and a[5] == b[5]
        assert not continues, f"runs {a} and {b} should be one"
    # Batches were short: merging across their boundaries was exercised.
    assert len(runs) < len(grid)


def test_twin_folds_the_same_rows_into_the_same_aggregate(recording):
    grid = expand(recording)
    # A holder waiting for a CPU is in state cpu_wait; the runs do not say which thread held the GIL,
    # but a pass flagged so names it when it has one cpu_wait thread and no other holder.
    cpu_waiters = Counter(p for (p, _tid), (state, _s, _n) in grid.items() if state == CPU_WAIT)
    flagged = {p for p, f in enumerate(recording.pass_flags) if f & PASS_HOLDER_CPU_WAIT}
    if any(cpu_waiters[p] != 1 for p in flagged):
        pytest.skip(
            "a pass whose GIL holder waited for a CPU had several threads waiting for one: the runs do not say which held it"
        )
    rows = sorted(
        (p, tid, state, stack, nr, state in (HOLDING_GIL, GC) or (state == CPU_WAIT and p in flagged))
        for (p, tid), (state, stack, nr) in grid.items()
    )
    twin = Session(recording.target, recording.rate_hz)
    twin.add_batch({"times": list(recording.times), **aggregate_rows(recording.samples, rows)})

    assert twin.runs() == recording.runs()
    assert twin.pass_flags == recording.pass_flags
    assert twin.held_cpu_wait == recording.held_cpu_wait

    holders_per_pass = Counter(p for (p, _tid), (state, _s, _n) in grid.items() if state in (HOLDING_GIL, GC))
    if any(n > 1 for n in holders_per_pass.values()):
        pytest.skip("a torn pass showed two holders: which one is blamed depends on read order")

    # The twin saw only each run's first stack, so holder stacks are left out.
    assert _sum_by_holder(twin.blame) == _sum_by_holder(recording.blame)
    waiting = Counter()
    for (tid, state, _stack), n in recording.stack_counts().items():
        if state == WAITING_GIL:
            waiting[tid] += n
    blamed = Counter()
    for (waiter, _holder, _stack), n in recording.blame.items():
        blamed[waiter] += n
    assert blamed == waiting and sum(waiting.values()) > 0


def _sum_by_holder(blame: dict) -> Counter:
    out = Counter()
    for (waiter, holder, _stack), n in blame.items():
        out[(waiter, holder)] += n
    return out
