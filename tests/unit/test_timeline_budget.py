"""A long recording's timeline stays within its budget (sampling/timeline.py), and what the summary
reads (counts, blame, pass flags, convoy episodes, idle syscalls) stays what every pass said."""

import random

import pytest
from gilty.report.recording import json as json_report
from gilty.sampling.analysis.convoy import _episode_wait, _episodes, _wakeups, convoys
from gilty.sampling.analysis.states import idle_syscalls, thread_states
from gilty.sampling.session import Session
from gilty.sampling.timeline import BUDGET_ENV
from synthetic import CLOCK_NANOSLEEP, FUTEX, HOLD, IDLE, NATIVE, WAIT, BatchBuilder, syscall_name, target

BUDGET = 2000
BATCHES = 120
PASSES_PER_BATCH = 250  # 30,000 passes of 6 threads: 15 times the budget in passes, ~60 in runs


def _batches(seed: int = 7) -> list:
    """Thread 1 spins; threads 2-6 nap 1-5 passes, wake (sometimes seen once native), wait 1-6
    passes, hold 1-2; thread 6 is missing for a while now and then."""
    rng = random.Random(seed)
    b = BatchBuilder(rate_hz=1000.0)
    spin = [b.stack(("spin", "app.py", 10 + i)) for i in range(3)]
    nap = b.stack(("nap", "app.py", 30))
    plans: dict = {tid: [] for tid in range(2, 7)}

    def next_state(tid: int):
        if not plans[tid]:
            nr = rng.choice((FUTEX, CLOCK_NANOSLEEP))
            plans[tid] += [(IDLE, nap, nr)] * rng.randint(1, 5)
            if rng.random() < 0.3:
                plans[tid].append((NATIVE, nap))
            plans[tid] += [(WAIT, nap)] * rng.randint(1, 6) + [(HOLD, nap)] * rng.randint(1, 2)
        return plans[tid].pop(0)

    out = []
    for k in range(BATCHES):
        passes = []
        for i in range(PASSES_PER_BATCH):
            p = {1: (HOLD, rng.choice(spin))}
            for tid in range(2, 7):
                state = next_state(tid)
                if tid != 6 or (k * PASSES_PER_BATCH + i) % 700 < 600:
                    p[tid] = state
            passes.append(p)
        out.append(b.batch(passes))
    return out


@pytest.fixture(scope="module")
def batches():
    return _batches()


def _record(batches, budget=None) -> tuple:
    """The session of ``batches`` and the most passes and runs it kept after any batch."""
    with pytest.MonkeyPatch.context() as mp:
        if budget is not None:
            mp.setenv(BUDGET_ENV, str(budget))
        session = Session(target(), 1000.0, start_time=1_700_000_000.0)
    if budget is None:
        session.timeline_budget = 10**9  # every pass and run kept: the reference
    most = [0, 0]
    for batch in batches:
        session.add_batch(batch, syscall_name)
        most = [max(most[0], len(session.times)), max(most[1], session.run_count)]
    return session, most


def _summary(s: Session) -> dict:
    return {
        "samples": s.samples,
        "duration": s.duration_s,
        "counts": s.counts,
        "blame": s.blame,
        "held": (s.passes_with_gil_held(), s.passes_in_gc(), s.passes_holder_cpu_wait()),
        "convoys": convoys(s),
        "idle_syscalls": idle_syscalls(s, thread_states(s)),
    }


def test_the_timeline_stays_within_its_budget_and_the_summary_stays_exact(batches):
    full, _ = _record(batches)
    small, most = _record(batches, BUDGET)
    passes = BATCHES * PASSES_PER_BATCH
    assert full.timeline_step == 1 and full.run_count > 20 * BUDGET, "the reference keeps every run"
    # Structural bound: after every batch, the passes and runs kept fit the budget.
    assert most[0] <= BUDGET and most[1] <= BUDGET, most
    assert small.timeline_step >= 16 and len(small.pass_flags) == len(small.times)
    assert len(small.stack_slots) <= 1024
    assert small.samples == passes and sum(small.counts.values()) == sum(full.counts.values())
    assert _summary(small) == _summary(full)
    assert any(c.episodes for c in convoys(full).values()), "the synthetic threads make convoy episodes"
    assert small.timeline_note.startswith(f"timeline resolution {small.timeline_step:g} ms after coarsening")


def test_a_coarsened_timeline_is_every_step_th_pass(batches):
    full, _ = _record(batches)
    small, _ = _record(batches, BUDGET)
    step = small.timeline_step
    assert list(small.times) == list(full.times[::step])
    assert small.pass_flags == full.pass_flags[::step]

    def state_at(session, tid):
        out = {}
        for _tid, first, passes, state, _stack, nr in (r for r in session.iter_runs() if r[0] == tid):
            for p in range(first, first + passes):
                out[p] = (state, nr)
        return out

    for tid in range(1, 7):
        kept, every = state_at(small, tid), state_at(full, tid)
        assert kept == {p // step: v for p, v in every.items() if p % step == 0}, tid


def test_the_fold_reads_the_same_episodes_as_the_runs(batches):
    """run_folds.py applies convoy._episodes' definition one run at a time: same episodes, waits, wake-ups."""
    full, _ = _record(batches)
    expected: dict = {}
    for tid, first, last in _episodes(full.iter_runs()):
        e = expected.setdefault(tid, [0, 0.0, 0])
        e[0] += 1
        e[1] += _episode_wait(full.times, first, last, full.period_s)
        e[2] += last - first + 1
    folded = full.folds.results()
    got = {t: v for t, v in folded["episodes"].items() if v[0]}
    assert got.keys() == expected.keys()
    for tid, (episodes, wait_s, waiting) in expected.items():
        assert got[tid][0] == episodes and got[tid][2] == waiting and got[tid][1] == pytest.approx(wait_s)
    assert {t: n for t, n in folded["wakeups"].items() if n} == _wakeups(full.iter_runs())


def test_saved_and_loaded_the_summary_and_the_note_stay(batches):
    small, _ = _record(batches, BUDGET)
    loaded = Session.from_dict(small.to_dict())
    assert _summary(loaded) == _summary(small)
    assert loaded.timeline_step == small.timeline_step and loaded.timeline_note == small.timeline_note
    report = json_report.report(loaded)
    assert report["timeline"]["note"] == small.timeline_note and report["samples"] == small.samples
    # A recording saved before the timeline had a budget (no "timeline"): counted again from its runs.
    full, _ = _record(batches[:10])
    old = full.to_dict()
    del old["timeline"]
    assert _summary(Session.from_dict(old)) == _summary(full)


def test_a_damaged_timeline_is_refused_in_one_line(batches):
    small, _ = _record(batches[:20], BUDGET)
    for damage in ({"step": 3}, {"passes": 10}, {"flag_counts": [10**9, 0, 0]}, {"folds": {"episodes": 1}}):
        data = small.to_dict()
        data["timeline"].update(damage)
        with pytest.raises(ValueError):
            Session.from_dict(data)
