"""Convoy episodes: idle, then straight into consecutive waiting_gil passes."""

import math

from gilty.sampling.analysis.convoy import convoys
from synthetic import HOLD, IDLE, NATIVE, WAIT, BatchBuilder, contention_session, make_session


def _session(states, rate_hz=1000.0, times=None, switch_interval_s=0.005):
    b = BatchBuilder(rate_hz=rate_hz)
    return make_session([b.batch([{1: s} for s in states], times=times)], rate_hz=rate_hz, switch_interval_s=switch_interval_s)


def test_episodes_and_mean_wait_from_timestamps():
    # Three wake-ups waiting 5, 4 and 6 passes at 1 kHz.
    states = [IDLE, IDLE] + [WAIT] * 5 + [HOLD] + [IDLE] * 3 + [WAIT] * 4 + [HOLD, IDLE] + [WAIT] * 6 + [HOLD]
    c = convoys(_session(states))[1]
    assert c.episodes == 3
    assert c.waiting_samples == 15
    assert math.isclose(c.mean_wait_s, 0.005)
    assert math.isclose(c.switch_intervals, 1.0)
    assert c.is_convoy
    assert not c.resolution_limited


def test_actual_timestamps_are_used_not_the_nominal_rate():
    # Passes ran late: 2 ms apart instead of 1 ms.
    states = [IDLE, WAIT, WAIT, HOLD]
    c = convoys(_session(states, times=[0.0, 0.002, 0.004, 0.006]))[1]
    assert c.episodes == 1 and math.isclose(c.mean_wait_s, 0.004)


def test_only_waits_straight_after_idle_count():
    # native -> waiting (releasing the GIL around C code) and holding -> waiting (forced switch) are not convoys.
    states = [NATIVE, WAIT, WAIT, HOLD, WAIT, HOLD, IDLE, HOLD, WAIT]
    assert convoys(_session(states))[1].episodes == 0


def test_a_missing_pass_breaks_the_chain():
    b = BatchBuilder(rate_hz=1000)
    passes = [{1: IDLE}, {2: HOLD}, {1: WAIT}]  # thread 1 was not read in pass 1 (torn, dropped)
    session = make_session([b.batch(passes)], rate_hz=1000)
    assert convoys(session)[1].episodes == 0


def test_episode_still_open_at_the_end_counts_one_period_for_its_last_pass():
    c = convoys(_session([IDLE, WAIT, WAIT]))[1]
    assert c.episodes == 1 and math.isclose(c.mean_wait_s, 0.002)


def test_episode_spanning_two_batches():
    b = BatchBuilder(rate_hz=1000)
    session = make_session([b.batch([{1: IDLE}, {1: WAIT}]), b.batch([{1: WAIT}, {1: HOLD}])], rate_hz=1000)
    c = convoys(session)[1]
    assert c.episodes == 1 and math.isclose(c.mean_wait_s, 0.002)


def test_convoy_needs_three_episodes_and_half_a_switch_interval():
    two = [IDLE, WAIT, WAIT, WAIT, HOLD] * 2
    assert not convoys(_session(two))[1].is_convoy
    short = [IDLE, WAIT, HOLD] * 5  # 1 ms waits against a 5 ms interval
    c = convoys(_session(short))[1]
    assert c.episodes == 5 and not c.is_convoy and math.isclose(c.switch_intervals, 0.2)
    assert c.resolution_limited


def test_no_episodes_means_no_mean():
    c = convoys(_session([HOLD, HOLD]))[1]
    assert c.episodes == 0 and c.mean_wait_s is None and c.switch_intervals is None and not c.is_convoy


def test_unknown_switch_interval_never_flags_a_convoy():
    c = convoys(_session([IDLE, WAIT, WAIT, HOLD] * 4, switch_interval_s=0.0))[1]
    assert c.episodes == 4 and c.switch_intervals is None and not c.is_convoy


def test_contention_scenario_convoys():
    session, _ = contention_session()
    result = convoys(session)
    # io-1 waits 2 passes per wake-up (10 ms passes = 20 ms), io-2 waits 3.
    assert math.isclose(result[3].mean_wait_s, 0.02) and result[3].is_convoy
    assert math.isclose(result[4].mean_wait_s, 0.03) and result[4].is_convoy
    assert result[2].episodes == 0 and result[1].episodes == 0


def test_one_native_pass_between_wake_up_and_wait_still_starts_an_episode():
    # A woken thread is often seen once running without the GIL before it reaches take_gil.
    states = [IDLE, NATIVE, WAIT, WAIT, HOLD, IDLE, NATIVE, NATIVE, WAIT, HOLD]
    c = convoys(_session(states))[1]
    # The first wake-up counts (one native pass); the second does not (native work, then a wait).
    assert c.episodes == 1


def _episodes_pass_by_pass(passes: list) -> dict:
    """Reference: {tid: [(first, last) pass of each episode]}, scanning every pass of every thread."""
    last: dict = {}  # tid -> (pass, state as seen, start of the open episode or None)
    episodes: dict = {}
    for p, threads in enumerate(passes):
        for tid, (state, _stack, _nr) in threads.items():
            prev_p, prev_state, start = last.get(tid, (None, None, None))
            consecutive = prev_p == p - 1
            if start is not None and not (state == WAIT and consecutive):
                episodes.setdefault(tid, []).append((start, prev_p))
                start = None
            if start is None and state == WAIT and consecutive and prev_state in (IDLE, "waking"):
                start = p
            elif state == NATIVE and consecutive and prev_state == IDLE:
                state = "waking"  # seen once running without the GIL on the way from idle to a wait
            last[tid] = (p, state, start)
    for tid, (prev_p, _state, start) in last.items():
        if start is not None:
            episodes.setdefault(tid, []).append((start, prev_p))
    return episodes


def test_episodes_from_runs_match_a_pass_by_pass_scan_whatever_the_batch_boundaries():
    import random

    rng = random.Random(7)
    for _trial in range(300):
        n = rng.randint(1, 40)
        passes = [
            {
                tid: (rng.choice([IDLE, IDLE, NATIVE, WAIT, WAIT, HOLD]), -1, rng.choice([-1, 202]))
                for tid in (1, 2, 3)
                if rng.random() > 0.1  # a thread missing from a pass cuts its runs
            }
            for _ in range(n)
        ]
        cuts = sorted(rng.sample(range(n + 1), min(3, n + 1)))
        b = BatchBuilder()
        session = make_session([b.batch(passes[a:c]) for a, c in zip([0, *cuts], [*cuts, n])])
        expected = _episodes_pass_by_pass(passes)
        got = convoys(session)
        for tid, c in got.items():
            waits = expected.get(tid, [])
            assert c.episodes == len(waits), passes
            assert c.waiting_samples == sum(last - first + 1 for first, last in waits), passes


def test_a_few_waits_among_many_wake_ups_are_not_a_convoy():
    # Short blocking calls at 500 Hz: 60 wake-ups straight into running, 3 into one pass of waiting for
    # the GIL (a pass is 2 ms, 0.4 switch intervals of 5 ms, so each reads 0.4-0.8).
    quick = [IDLE, IDLE, HOLD]
    waited = [IDLE, IDLE, WAIT, WAIT, HOLD]
    states = quick * 20 + waited + quick * 20 + waited + quick * 20 + waited
    c = convoys(_session(states, rate_hz=500.0))[1]
    assert c.episodes == 3 and c.switch_intervals >= 0.5 and c.wakeups == 63
    assert not c.is_convoy
    # The same three episodes with no other wake-ups are one.
    assert convoys(_session(waited * 3, rate_hz=500.0))[1].is_convoy
