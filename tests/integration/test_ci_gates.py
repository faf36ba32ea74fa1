"""CI gates and `-- CMD` exit statuses, as a CI job would use them: `--fail-if` exits 10 naming the
thread over the limit; a gate that does not hold leaves the status alone; `record -- CMD` ends with
CMD's own status; a bad expression is one line before anything is attached."""

from __future__ import annotations

import json
import sys

from conftest import assert_one_error_line, run_gilty, running_target

# The interpreter running the tests is the target: one is enough, gates read the report.
HOST = sys.executable


def test_a_gate_that_holds_fails_the_run_and_names_the_thread():
    with running_target(HOST, "spinners.py") as proc:
        rc, out, err = run_gilty(
            "record",
            "--pid",
            proc.pid,
            "--duration",
            2,
            "--rate",
            200,
            "--format",
            "json",
            "--fail-if",
            "waiting_gil>0.2",
            "--fail-if",
            "gc>0.5",
        )
    assert rc == 10, err
    gate_lines = [line for line in err.splitlines() if "gate failed" in line]
    assert len(gate_lines) == 1 and "waiting_gil>0.2: thread 'spinner-" in gate_lines[0], err
    report = json.loads(out)
    waits, gcs = report["gates"]
    assert waits["passed"] is False and {f["thread"] for f in waits["failures"]} == {"spinner-1", "spinner-2"}
    assert gcs["passed"] is True and gcs["failures"] == []


def test_a_gate_that_does_not_hold_keeps_exit_0():
    with running_target(HOST, "spinners.py") as proc:
        rc, out, err = run_gilty(
            "record",
            "--pid",
            proc.pid,
            "--duration",
            1,
            "--rate",
            200,
            "--format",
            "json",
            "--fail-if",
            "thread=spinner-*:wait>0.95",
        )
    assert rc == 0, err
    assert json.loads(out)["gates"][0]["passed"] is True


def test_record_of_a_command_exits_with_its_status():
    code = "import sys, time\nx = 0\nend = time.time() + 1.0\nwhile time.time() < end:\n    x += 1\nsys.exit(3)\n"
    rc, out, err = run_gilty("record", "--rate", 200, "--format", "json", "--", sys.executable, "-c", code)
    assert rc == 3, err
    assert json.loads(out)["command_status"] == 3


def test_a_bad_gate_is_one_line_before_attaching():
    rc, _out, err = run_gilty("record", "--pid", 4194303, "--fail-if", "waiting>0.2")  # pid_max - 1: no such process
    assert rc == 2
    assert "unknown metric 'waiting'" in assert_one_error_line(err)
