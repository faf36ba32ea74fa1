"""`gilty mcp`'s tools without the `mcp` package (gilty.assist.tools): the bounds a call is refused
at, in one line; a failure said as the command line says it; the knee of a load report written by
the report registry, read back with its text line. The server over stdio, with the package's own
client and live targets, is tests/integration/test_mcp.py."""

from __future__ import annotations

import json

import pytest
from gilty import report
from gilty._errors import CommandError
from gilty.assist import tools
from gilty.load.analysis import Knee, StepVerdict
from gilty.load.result import LoadRun


@pytest.mark.parametrize(
    "duration, rate, said",
    [
        (61, 100, "duration 61 s is out of bounds"),
        (0, 100, "duration 0 s is out of bounds"),
        (-1, 100, "duration -1 s is out of bounds"),
        (float("nan"), 100, "duration nan s is out of bounds"),
        (float("inf"), 100, "duration inf s is out of bounds"),
        (1, 1001, "rate 1001 Hz is out of bounds"),
        (1, 0.05, "rate 0.05 Hz is out of bounds"),
        (1, float("nan"), "rate nan Hz is out of bounds"),
    ],
)
def test_a_record_out_of_bounds_is_refused_in_one_line(duration, rate, said):
    with pytest.raises(CommandError) as refused:
        tools.record_options(4242, duration, rate)
    line = tools.error_line(refused.value)
    assert line.startswith(f"gilty: error: {said}") and "\n" not in line
    assert refused.value.exit_code == 2


def test_the_bounds_themselves_are_taken():
    options = tools.record_options(4242, tools.MAX_RECORD_S, tools.MAX_RATE_HZ)
    assert (options.sampling.duration_s, options.sampling.rate_hz, options.output.format) == (60.0, 1000.0, "json")
    assert options.target.pids == (4242,) and options.target.command is None
    assert tools.record_options(4242, 0.5, tools.MIN_RATE_HZ).sampling.rate_hz == 0.1


@pytest.mark.parametrize("pid", [0, -3, 2**22 + 1, True])
def test_a_pid_out_of_range_is_refused(pid):
    with pytest.raises(CommandError, match="must be a whole number between 1 and 4194304"):
        tools.record_options(pid, 1, 100)


def test_tasks_of_several_processes_are_refused_as_the_command_line_refuses_them():
    with pytest.raises(CommandError, match="tasks reads one process's event loops"):
        tools.record_options(4242, 1, 100, subprocesses=True, tasks=True)


@pytest.mark.parametrize("command", ["memory", "specialization"])
@pytest.mark.parametrize("duration", [61, 0, -1, float("nan"), float("inf")])
def test_a_memory_or_specialization_run_out_of_bounds_is_refused_in_one_line(command, duration):
    build = {"memory": tools.memory_options, "specialization": tools.specialization_options}[command]
    with pytest.raises(CommandError) as refused:
        build(4242, duration)
    line = tools.error_line(refused.value)
    assert line == (
        f"gilty: error: duration {duration:g} s is out of bounds: a {command} run from the mcp server lasts more than 0 "
        f"and at most 60 s (for longer, run `gilty {command} --duration S -o FILE.json`)"
    )
    assert refused.value.exit_code == 2


@pytest.mark.parametrize("pid", [0, -3, 2**22 + 1, True])
def test_memory_and_specialization_refuse_a_pid_out_of_range(pid):
    for build in (tools.memory_options, tools.specialization_options):
        with pytest.raises(CommandError, match="must be a whole number between 1 and 4194304"):
            build(pid, 1)


def test_memory_options_are_the_command_line_s_defaults():
    # `gilty memory --pid 4242 --duration 60 --faults --format json`, as cli/memory.py builds it.
    from gilty.cli import parse_options

    options = tools.memory_options(4242, tools.MAX_RECORD_S, faults=True)
    assert options == parse_options(["memory", "--pid", "4242", "--duration", "60", "--faults", "--format", "json"])
    assert (options.interval_s, options.gc_poll_ms, options.fault_period) == (1.0, 1.0, 1)
    assert tools.memory_options(4242, 0.5).faults is False


def test_specialization_options_are_the_command_line_s_defaults():
    from gilty.cli import parse_options

    options = tools.specialization_options(4242, 0.5)
    assert options == parse_options(["specialization", "--pid", "4242", "--duration", "0.5", "--format", "json"])
    assert (options.rate_hz, options.read_interval_ms, options.top, options.subprocesses) == (500.0, 5.0, 10, False)


def test_a_result_over_the_size_bound_is_refused(monkeypatch):
    monkeypatch.setattr(tools, "MAX_RESULT_BYTES", 1 << 20)
    assert tools.bounded("x" * 1000) == "x" * 1000
    with pytest.raises(CommandError, match=r"the JSON report is 2\.0 MiB, over the 1 MiB a tool result carries"):
        tools.bounded("é" * (1 << 20))  # bytes, not characters


def test_a_failure_is_the_command_line_s_one_line():
    assert tools.error_line(CommandError("no process with pid 7\n  (gone)")) == "gilty: error: no process with pid 7 (gone)"
    # A name the target chose is written out, not acted on.
    assert tools.error_line(CommandError("thread \x1b[2J")) == "gilty: error: thread \\x1b[2J"
    assert tools.error_line(KeyError("x")) == "gilty: error: internal error: KeyError: 'x'"
    ok, line = tools.answer(lambda: 1 / 0)
    assert not ok and line == "gilty: error: internal error: ZeroDivisionError: division by zero"
    assert tools.answer(lambda: "{}") == (True, "{}")


def _verdict(rate: float, throughput: float, p99: float, meets: bool) -> StepVerdict:
    return StepVerdict(rate, throughput, 0.0, p99, p99, meets, False, rate * p99, rate * p99, answers=int(rate * 5))


def _load_report(tmp_path, knee: Knee) -> str:
    """A load report as `gilty load -o FILE.json` writes it (the registry's JSON of a LoadRun)."""
    steps = [{"requested_rate": rate, "ok": int(rate * 5)} for rate in (50.0, 100.0, 150.0)]
    verdicts = [_verdict(50, 50, 0.02, True), _verdict(100, 99, 0.04, True), _verdict(150, 110, 0.4, False)]
    run = LoadRun([("http://127.0.0.1:8000/", 1.0)], "constant", ("p99", 0.05), steps, verdicts, knee=knee)
    path = tmp_path / "load.json"
    path.write_text(report.render(run, "json"))
    return str(path)


def read_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_the_knee_of_a_saved_load_report_and_its_line(tmp_path):
    knee = Knee(100.0, 110.0, 2.2, "concurrency", "p99 rose past 50 ms at 150 rps; every worker was busy")
    path = _load_report(tmp_path, knee)
    answer = tools.load_knee(path, read_json)
    assert answer["knee"] == {
        "rate": 100.0,
        "max_throughput": 110.0,
        "effective_concurrency": 2.2,
        "limit": "concurrency",
        "explanation": "p99 rose past 50 ms at 150 rps; every worker was busy",
    }
    assert answer["summary"] == "Knee: 100 rps (limit: concurrency). p99 rose past 50 ms at 150 rps; every worker was busy."
    assert answer["slo"] == {"percentile": "p99", "limit_s": 0.05}
    assert [v["rate"] for v in answer["steps"]] == [50, 100, 150]
    assert [v["meets_slo"] for v in answer["steps"]] == [True, True, False]
    json.dumps(answer)  # what the tool sends


def test_a_knee_below_the_first_step(tmp_path):
    path = _load_report(tmp_path, Knee(None, 50.0, None, "none reached", "even 50 rps missed p99 <= 50 ms"))
    assert tools.load_knee(path, read_json)["summary"] == "Knee: below 50 rps. even 50 rps missed p99 <= 50 ms."


def test_what_is_not_a_load_report_is_refused(tmp_path):
    locust = tmp_path / "locust.json"
    locust.write_text(json.dumps({"kind": "load_locust", "loop": "closed"}))
    with pytest.raises(CommandError, match="is a Locust run, which has no knee"):
        tools.load_knee(str(locust), read_json)
    other = tmp_path / "rec.json"
    other.write_text(json.dumps([1, 2]))
    with pytest.raises(CommandError, match="is not a `gilty load` JSON report"):
        tools.load_knee(str(other), read_json)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"kind": "load", "steps": []}))
    with pytest.raises(CommandError, match="holds a load run of no step"):
        tools.load_knee(str(empty), read_json)
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps({"kind": "load", "steps": [{"requested_rate": 5}]}))
    with pytest.raises(CommandError, match="the load report in it is damaged"):
        tools.load_knee(str(damaged), read_json)
