"""CI gates: parsing `--fail-if` expressions and judging summaries of synthetic recordings."""

import pytest
from gilty._errors import UsageError
from gilty.sampling.analysis import summarise
from gilty.sampling.analysis.gates import describe_failure, evaluate, parse_gate
from synthetic import HOLD, IDLE, WAIT, BatchBuilder, make_session


def _contended():
    b = BatchBuilder(names={1: "spinner", 2: "worker-1", 3: "sleeper"})
    passes = [{1: HOLD, 2: WAIT, 3: IDLE}] * 6 + [{1: WAIT, 2: HOLD, 3: IDLE}] * 4
    return make_session([b.batch(passes)])


def test_thread_gate_names_the_worst_thread():
    session = _contended()
    [result] = evaluate([parse_gate("waiting_gil>0.2")], [(session.target.pid, summarise(session))])
    assert not result.passed
    assert [f["thread"] for f in result.failures] == ["worker-1", "spinner"]  # 0.6 then 0.4
    line = describe_failure(result)
    assert "gate failed: waiting_gil>0.2: thread 'worker-1'" in line and "0.600" in line and "1 more" in line


def test_scoped_and_percent_and_process_gates():
    session = _contended()
    summaries = [(session.target.pid, summarise(session))]
    [scoped] = evaluate([parse_gate("thread=sleep*:wait>=1%")], summaries)
    assert scoped.passed
    [hold] = evaluate([parse_gate("thread=spinner:hold>50%")], summaries)
    assert not hold.passed and hold.failures[0]["value"] == pytest.approx(0.6)
    [gil] = evaluate([parse_gate("process:gil_utilisation>=1")], summaries)
    assert not gil.passed and gil.failures[0]["thread"] is None
    [low] = evaluate([parse_gate("gil<0.5")], summaries)
    assert low.passed


@pytest.mark.parametrize(
    "text,message",
    [
        ("waiting>0.2", "unknown metric 'waiting'"),
        ("wait=0.2", "expected e.g."),
        ("process:wait>0.2", "is a thread's share"),
        ("thread=x:gil>0.2", "is a process figure"),
    ],
)
def test_bad_expressions_are_one_clear_usage_error(text, message):
    with pytest.raises(UsageError) as e:
        parse_gate(text)
    assert message in str(e.value) and "\n" not in str(e.value)
