"""Top functions: innermost frame, pooled across lines, per state."""

from gilty.sampling.analysis.functions import top_function_overall, top_functions
from gilty.sampling.analysis.states import thread_states
from synthetic import HOLD, IDLE, NATIVE, WAIT, BatchBuilder, make_session


def test_top_functions_per_state_use_innermost_frame_and_pool_lines():
    b = BatchBuilder()
    spin12 = b.stack(("spin", "app.py", 12), ("main", "app.py", 40))
    spin13 = b.stack(("spin", "app.py", 13), ("main", "app.py", 40))
    other = b.stack(("other", "app.py", 50), ("main", "app.py", 40))
    passes = (
        [{1: (HOLD, spin12)}] * 3
        + [{1: (HOLD, spin13)}] * 2
        + [{1: (HOLD, other)}]
        + [{1: (WAIT, other)}] * 2
        + [{1: NATIVE}] * 2
    )
    session = make_session([b.batch(passes)])
    shares = top_functions(session, thread_states(session))[1]
    hold = [s for s in shares if s.state == "holding_gil"]
    assert [(s.function, s.line, s.samples) for s in hold] == [("spin", 12, 5), ("other", 50, 1)]
    assert hold[0].fraction == 0.5
    wait = [s for s in shares if s.state == "waiting_gil"]
    assert [(s.function, s.fraction) for s in wait] == [("other", 0.2)]
    native = [s for s in shares if s.state == "native"]
    assert native[0].function is None and native[0].label() == "(no Python stack)"
    # Listed in state-code order.
    assert [s.state for s in shares] == ["holding_gil", "holding_gil", "waiting_gil", "native"]


def test_top_functions_limit_per_state():
    b = BatchBuilder()
    passes = [{1: (HOLD, b.stack((f"f{i}", "a.py", i)))} for i in range(8)]
    session = make_session([b.batch(passes)])
    assert len(top_functions(session, thread_states(session), limit=3)[1]) == 3


def test_top_function_overall_prefers_a_python_stack():
    b = BatchBuilder()
    sleep = b.stack(("sleep_loop", "app.py", 5))
    passes = [{1: IDLE}] * 5 + [{1: (IDLE, sleep, 230)}] * 2
    session = make_session([b.batch(passes)])
    share = top_function_overall(session, thread_states(session))[1]
    assert share.function == "sleep_loop" and share.state == "idle"
