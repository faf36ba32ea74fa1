"""Per-thread state shares and process-wide GIL figures."""

import math

from gilty.sampling.analysis.states import gc_share, gil_utilisation, idle_syscalls, mean_waiting_threads, thread_states
from gilty.sampling.analysis.summary import summarise
from synthetic import (
    CLOCK_NANOSLEEP,
    EPOLL_WAIT,
    FUTEX,
    GC,
    HOLD,
    IDLE,
    NATIVE,
    UNKNOWN,
    WAIT,
    BatchBuilder,
    contention_session,
    make_session,
)


def test_fractions_sum_to_one_per_thread():
    session, _ = contention_session()
    for st in thread_states(session).values():
        assert math.isclose(sum(st.fractions().values()), 1.0)


def test_fractions_count_each_state():
    b = BatchBuilder()
    passes = [{1: HOLD}, {1: HOLD}, {1: GC}, {1: WAIT}, {1: NATIVE}, {1: IDLE}, {1: UNKNOWN}, {1: 17}]
    st = thread_states(make_session([b.batch(passes)]))[1]
    assert st.samples == 8
    assert st.fractions() == {
        "holding_gil": 2 / 8,
        "gc": 1 / 8,
        "waiting_gil": 1 / 8,
        "native": 1 / 8,
        "idle": 1 / 8,
        "unknown": 2 / 8,  # an unknown state code counts as unknown rather than vanishing
        "cpu_wait": 0.0,
    }
    assert st.holding == 3


def test_gil_utilisation_counts_passes_with_a_holder_or_gc():
    b = BatchBuilder()
    passes = [{1: HOLD, 2: WAIT}, {1: GC, 2: WAIT}, {1: IDLE, 2: IDLE}, {1: NATIVE, 2: WAIT}]
    session = make_session([b.batch(passes)])
    assert gil_utilisation(session) == 0.5
    assert gc_share(session) == 0.25
    assert mean_waiting_threads(session) == 0.75


def test_empty_session_has_zero_figures():
    session = make_session([])
    assert gil_utilisation(session) == 0.0
    assert mean_waiting_threads(session) == 0.0
    assert summarise(session).threads == []


def test_idle_breakdown_by_syscall_adds_up_to_idle_share():
    b = BatchBuilder()
    passes = (
        [{1: (IDLE, -1, FUTEX)}] * 3
        + [{1: (IDLE, -1, CLOCK_NANOSLEEP)}] * 2
        + [{1: (IDLE, -1, EPOLL_WAIT)}, {1: HOLD}, {1: (IDLE, -1, -1)}]
    )
    session = make_session([b.batch(passes)])
    states = thread_states(session)
    idle = idle_syscalls(session, states)[1]
    assert idle == {"futex": 3 / 8, "clock_nanosleep": 2 / 8, "epoll_wait": 1 / 8, "unknown": 1 / 8}
    assert math.isclose(sum(idle.values()), states[1].fraction(IDLE))


def test_idle_futex_is_a_lock_wait_not_a_gil_wait():
    b = BatchBuilder()
    passes = [{1: (IDLE, -1, FUTEX)}] * 3 + [{1: (IDLE, -1, CLOCK_NANOSLEEP)}]
    summary = summarise(make_session([b.batch(passes)]))
    t = summary.threads[0]
    assert t.idle_kinds == {"lock wait": 0.75, "sleep": 0.25}
    assert t.states.fraction(WAIT) == 0.0
