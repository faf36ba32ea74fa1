"""`gilty mcp` (issue 32, item 4) driven by the `mcp` package's own client (``stdio_client`` and
``ClientSession``, tests/integration/mcp_client.py) over stdio, against live targets: the tools
are listed with their schemas, a dump is the command line's JSON word for word, a one-second record
holds the target's threads, a failure is gilty's one line as a tool error and the server goes on
serving, a record past the bound is refused before anything is attached, and the saved-report tools
(compare, load_knee) answer as `gilty compare` and `gilty report` do; memory (on a fork pool) and
specialization answer with the keys, pids and roles of `gilty memory` and `gilty specialization`
with --format json.

The client and the server run in a venv of the interpreter under test with the pinned `mcp`
(package_venvs.venv_python; skipped with the reason when it cannot be installed), the server as
`python -m gilty mcp` with PYTHONPATH at this tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest
from conftest import (
    REPO,
    TARGETS,
    assert_one_error_line,
    free_port,
    gilty_command,
    gilty_env,
    one_version,
    parse_json,
    run_gilty,
    running_target,
)
from package_venvs import venv_python
from pool_support import running_pool

pytestmark = pytest.mark.interpreter

MCP_PIN = "mcp==2.3.0"  # pyproject.toml's `mcp` extra
CLIENT = Path(__file__).with_name("mcp_client.py")
TOOLS = {"dump", "dump_core", "record", "memory", "specialization", "compare", "load_knee"}
THREAD_NAMES = ["plain-ascii", "wörker-é", "線程", "snake-🐍"]  # tests/targets/thread_names.py


@pytest.fixture(scope="module")
def mcp_python(interp):
    if interp.path is None:
        pytest.skip(interp.skip_reason)
    one_version(interp, "the MCP server's protocol and tools, over reads every version's dump and record tests check")
    return venv_python(interp, "mcp", (MCP_PIN,), "import mcp.server.mcpserver, mcp.client.stdio")


@pytest.fixture(scope="module")
def named_threads(interp):
    with running_target(interp, "thread_names.py") as proc:
        yield proc


def session(python: str, *calls, timeout: float = 90, log: Optional[list] = None) -> list:
    """Start `gilty mcp` under ``python``, make ``calls`` in one MCP session, return the answers
    (and add the server's stderr, which the client passes on, to ``log``)."""
    plan = {
        "command": [python, "-m", "gilty", "mcp"],
        "env": {"PYTHONPATH": str(REPO / "python"), "PYTHONIOENCODING": "utf-8"},
        "cwd": str(REPO),
        "calls": [list(call) for call in calls],
    }
    done = subprocess.run([python, str(CLIENT), json.dumps(plan)], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"the MCP client failed ({done.returncode}); stderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr  # the server's stderr comes through the client's
    if log is not None:
        log.append(done.stderr)
    return json.loads(done.stdout)["calls"]


def text_of(answer: dict) -> str:
    assert len(answer["texts"]) == 1, answer
    return answer["texts"][0]


def json_of(answer: dict) -> dict:
    assert not answer["is_error"], answer
    return parse_json(text_of(answer), f"the {answer['tool']} tool's answer")


def error_of(answer: dict) -> str:
    assert answer["is_error"], answer
    return text_of(answer)


def test_the_tools_are_listed_with_their_input_schemas(mcp_python):
    (listed,) = session(mcp_python, ["list_tools"])
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert set(tools) == TOOLS
    required = {
        "dump": ["pid"],
        "dump_core": ["core"],
        "record": ["pid"],
        "memory": ["pid"],
        "specialization": ["pid"],
        "compare": ["a", "b"],
        "load_knee": ["path"],
    }
    for name, tool in tools.items():
        schema = tool["input_schema"]
        assert schema["type"] == "object" and schema["required"] == required[name], (name, schema)
        assert tool["read_only"] is True and tool["description"], tool
    assert tools["dump"]["input_schema"]["properties"]["pid"]["type"] == "integer"
    assert set(tools["dump"]["input_schema"]["properties"]) == {"pid", "subprocesses", "tasks", "locals", "native"}
    assert set(tools["dump_core"]["input_schema"]["properties"]) == {"core", "exe", "sysroot", "tasks", "locals", "native"}
    assert "free_threading" in tools["record"]["input_schema"]["properties"]
    duration = tools["record"]["input_schema"]["properties"]["duration"]
    rate = tools["record"]["input_schema"]["properties"]["rate"]
    # The bounds are in the schema the assistant reads, not only in the refusal.
    assert (duration["type"], duration["maximum"], duration["exclusiveMinimum"]) == ("number", 60, 0)
    assert (rate["minimum"], rate["maximum"]) == (0.1, 1000)
    assert "60 s" in tools["record"]["description"]
    assert set(tools["memory"]["input_schema"]["properties"]) == {"pid", "duration", "faults"}
    assert set(tools["specialization"]["input_schema"]["properties"]) == {"pid", "duration"}
    for name in ("memory", "specialization"):
        duration = tools[name]["input_schema"]["properties"]["duration"]
        assert (duration["type"], duration["maximum"], duration["exclusiveMinimum"]) == ("number", 60, 0), name
        assert f"gilty {name} --pid" in tools[name]["description"] and "60 s" in tools[name]["description"]


def test_dump_of_a_live_target_is_the_command_line_json(mcp_python, named_threads):
    (answer,) = session(mcp_python, ["dump", {"pid": named_threads.pid}])
    dump = json_of(answer)
    assert dump["target"]["pid"] == named_threads.pid
    names = [t["name"] for t in dump["threads"]]
    assert sorted(names) == sorted(["MainThread", *THREAD_NAMES]), names
    parked = [t for t in dump["threads"] if t["name"] in THREAD_NAMES]
    assert all(t["stack"][0]["function"] == "park" and t["state"] == "idle" for t in parked), parked
    # Every thread is parked, so a dump is the same twice: the tool's text is the command's stdout.
    rc, out, err = run_gilty("dump", "--pid", named_threads.pid, "--format", "json")
    assert rc == 0, err
    assert text_of(answer) == out


def test_a_one_second_record_holds_the_target_threads(mcp_python, named_threads):
    started = time.monotonic()
    (answer,) = session(mcp_python, ["record", {"pid": named_threads.pid, "duration": 1, "rate": 200}])
    elapsed = time.monotonic() - started
    report = json_of(answer)
    assert report["target"]["pid"] == named_threads.pid
    assert report["requested_duration_s"] == 1.0 and 0.5 < report["duration_s"] < 3.0, report["duration_s"]
    assert report["rate_hz"] == 200 and report["samples"] > 0
    assert sorted(t["name"] for t in report["threads"]) == sorted(["MainThread", *THREAD_NAMES])
    # The parked threads sleep the whole second: idle, never holding the GIL.
    for thread in report["threads"]:
        if thread["name"] in THREAD_NAMES:
            assert thread["states"]["idle"] > 0.9 and thread["states"]["holding_gil"] == 0, thread
    assert "recording" in report  # the raw recording, as `gilty record --format json` writes it
    assert elapsed < 30, f"a one-second record took {elapsed:.1f} s over MCP"


def test_a_failure_is_gilty_s_one_line_and_the_server_goes_on(mcp_python, named_threads):
    not_python = subprocess.Popen(["sleep", "60"])
    try:
        gone = subprocess.Popen(["true"])
        gone.wait()
        answers = session(
            mcp_python,
            ["dump", {"pid": gone.pid}],
            ["dump", {"pid": named_threads.pid}],
            ["record", {"pid": not_python.pid, "duration": 1}],
            ["dump", {"pid": named_threads.pid, "locals": True}],
        )
        for pid, answer in ((gone.pid, answers[0]), (not_python.pid, answers[2])):
            line = error_of(answer)
            assert "\n" not in line and "Traceback" not in line, line
            # Word for word the line `gilty` prints on stderr for the same pid.
            rc, _, err = run_gilty("dump", "--pid", pid)
            assert rc != 0
            assert line == assert_one_error_line(err)
        assert "no process with pid" in error_of(answers[0])
        assert "not a Python process" in error_of(answers[2])
        # The calls after each failure are answered, by the same server.
        for answer in (answers[1], answers[3]):
            assert {t["name"] for t in json_of(answer)["threads"]} >= set(THREAD_NAMES)
    finally:
        not_python.kill()
        not_python.wait()


def test_a_record_past_the_bounds_or_a_bad_argument_is_refused_before_attaching(mcp_python, named_threads):
    pid = named_threads.pid
    started, log = time.monotonic(), []
    answers = session(
        mcp_python,
        ["record", {"pid": pid, "duration": 61}],
        ["record", {"pid": pid, "duration": 0}],
        ["record", {"pid": pid, "duration": 1, "rate": 5000}],
        ["record", {"pid": pid, "duration": "a minute"}],
        ["dump", {}],
        ["record", {"pid": pid, "duration": 0.3}],
        log=log,
    )
    elapsed = time.monotonic() - started
    too_long = error_of(answers[0])
    assert too_long.startswith("gilty: error: duration 61 s is out of bounds") and "at most 60 s" in too_long
    assert "duration 0 s is out of bounds" in error_of(answers[1])
    assert "rate 5000 Hz is out of bounds" in error_of(answers[2])
    # Arguments the schema refuses (the package's validation) are one line too.
    assert error_of(answers[3]).startswith("gilty: error: record: duration: Input should be a valid number")
    assert error_of(answers[4]) == "gilty: error: dump: pid: Field required (see the tool's input schema)"
    assert all("\n" not in error_of(answer) for answer in answers[:5])
    assert json_of(answers[5])["requested_duration_s"] == 0.3
    # Only the last record attached (`gilty: recording pid ...` is what a record says when it starts).
    assert log[0].count(f"gilty: recording pid {pid} ") == 1, log[0]
    # Refused at once: the refusals did not sample (the session is the server's start, 0.3 s of
    # recording and the client's own start).
    assert elapsed < 20, elapsed


def test_compare_and_load_knee_answer_from_saved_reports(mcp_python, named_threads, tmp_path):
    pid = named_threads.pid
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    first, second = session(mcp_python, ["record", {"pid": pid, "duration": 0.5}], ["record", {"pid": pid, "duration": 0.5}])
    a.write_text(text_of(first), encoding="utf-8")
    b.write_text(text_of(second), encoding="utf-8")

    # A real load run on a server of one request at a time, 20 ms each: a knee to read back.
    load = tmp_path / "load.json"
    port = free_port()
    done = subprocess.run(
        [
            *gilty_command(),
            "load",
            f"http://127.0.0.1:{port}/",
            "--ramp",
            "20:80:30",
            "--duration",
            "1",
            "--slo",
            "p99=100ms",
            "-o",
            str(load),
            "--",
            sys.executable,
            str(TARGETS / "http_delay_server.py"),
            str(port),
            "0.02",
            "serial",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=gilty_env(),
    )
    assert done.returncode == 0, done.stderr

    compared, knee, not_load, missing = session(
        mcp_python,
        ["compare", {"a": str(a), "b": str(b)}],
        ["load_knee", {"path": str(load)}],
        ["load_knee", {"path": str(a)}],
        ["compare", {"a": str(a), "b": str(tmp_path / "nowhere.json")}],
    )
    rc, out, err = run_gilty("compare", a, b, "--format", "json")
    assert rc == 0, err
    assert text_of(compared) == out
    assert json_of(compared)["compared"] == "recording"

    saved = json.loads(load.read_text())
    answer = json_of(knee)
    assert answer["knee"] == saved["knee"] and answer["knee"]["explanation"]
    assert answer["steps"] == [step["verdict"] for step in saved["steps"]]
    # The summary is the text report's knee line, as `gilty report load.json` writes it.
    rc, out, err = run_gilty("report", load)
    assert rc == 0, err
    assert answer["summary"] in out.splitlines(), (answer["summary"], out)

    assert "is not a `gilty load` JSON report" in error_of(not_load)
    rc, _, err = run_gilty("compare", a, tmp_path / "nowhere.json")
    assert error_of(missing) == assert_one_error_line(err)


def test_without_the_mcp_package_it_says_how_to_install_it():
    # The test run's own interpreter, which has no `mcp` (tests get it in a venv of their own).
    probe = subprocess.run([sys.executable, "-c", "import mcp"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip(f"{sys.executable} has the mcp package: nothing to refuse")
    env = dict(gilty_env(), PYTHONPATH=str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "gilty", "mcp"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 2
    line = assert_one_error_line(done.stderr)
    assert "pip install 'gilty[mcp]'" in line, line
    assert done.stdout == ""


def test_a_core_file_and_free_threading_answer_as_the_command_line(mcp_python, named_threads, tmp_path):
    # dump_core is `gilty dump --core CORE --format json` word for word; record's free_threading adds
    # the readiness section (docs/free-threading.md) as --free-threading does.
    gcore = shutil.which("gcore")
    if gcore is None:
        pytest.skip("gdb's gcore is not installed (apt-get install gdb)")
    done = subprocess.run(
        [gcore, "-o", str(tmp_path / "core"), str(named_threads.pid)], capture_output=True, text=True, timeout=120
    )
    core = tmp_path / f"core.{named_threads.pid}"
    assert done.returncode == 0 and core.exists(), done.stdout + done.stderr
    from_core, bad, ft = session(
        mcp_python,
        ["dump_core", {"core": str(core)}],
        ["dump_core", {"core": str(tmp_path / "no-such-core")}],
        ["record", {"pid": named_threads.pid, "duration": 0.5, "free_threading": True}],
    )
    rc, out, err = run_gilty("dump", "--core", core, "--format", "json")
    assert rc == 0, err
    assert text_of(from_core) == out
    assert {t["name"] for t in json_of(from_core)["threads"]} >= set(THREAD_NAMES)
    rc, _, err = run_gilty("dump", "--core", tmp_path / "no-such-core")
    assert rc != 0 and error_of(bad) == assert_one_error_line(err)
    readiness = json_of(ft)["free_threading"]
    assert readiness["asked"] is True and readiness["verdict"], readiness
    assert readiness["modules"], readiness  # the extension modules, read only when asked


def _same_shape(tool: dict, cli: dict, what: str) -> None:
    """The same keys, at the top and one level down (the figures differ from run to run)."""
    assert set(tool) == set(cli), (what, set(tool) ^ set(cli))
    for key, value in cli.items():
        if isinstance(value, dict):
            assert set(tool[key]) == set(value), (what, key, set(tool[key]) ^ set(value))


def test_memory_of_a_prefork_pool_is_the_command_line_json(mcp_python, interp):
    # A small fork pool (tests/targets/pool_workers.py): a master and two workers.
    with running_pool(interp.path, 2, "20000") as (master, workers):
        log: list = []
        answer, too_long = session(
            mcp_python, ["memory", {"pid": master, "duration": 1}], ["memory", {"pid": master, "duration": 61}], log=log
        )
        rc, out, err = run_gilty("memory", "--pid", master, "--duration", "1", "--format", "json", timeout=60)
    assert rc == 0, err
    tool, cli = json_of(answer), parse_json(out, "gilty memory --format json")
    assert tool["kind"] == cli["kind"] == "memory" and tool["master_pid"] == cli["master_pid"] == master
    for key in ("format_version", "requested_duration_s", "interval_s", "partial", "method"):
        assert tool[key] == cli[key], key
    assert (tool["requested_duration_s"], tool["interval_s"], tool["partial"]) == (1.0, 1.0, False)
    roles = {(p["pid"], p["role"]) for p in tool["processes"]}
    assert roles == {(p["pid"], p["role"]) for p in cli["processes"]}
    assert roles == {(master, "master"), *((w, "worker") for w in workers)}, roles
    _same_shape(tool, cli, "memory report")
    for mine, theirs in zip(tool["processes"], cli["processes"]):
        _same_shape(mine, theirs, f"process {mine['pid']}")
    assert tool["faults"] == cli["faults"]  # without --faults, both say none were sampled
    # Refused before attaching: the one run said it measures, the refusal did not.
    assert error_of(too_long).startswith("gilty: error: duration 61 s is out of bounds: a memory run from the mcp server")
    assert log[0].count(f"gilty: measuring pid {master} ") == 1, log[0]


def test_specialization_of_a_live_target_is_the_command_line_json(mcp_python, interp, tmp_path):
    with running_target(interp, "specialization_sites.py", "run", str(tmp_path / "run.json")) as proc:
        log: list = []
        answer, refused = session(
            mcp_python,
            ["specialization", {"pid": proc.pid, "duration": 1}],
            ["specialization", {"pid": proc.pid, "duration": 0}],
            log=log,
        )
        rc, out, err = run_gilty("specialization", "--pid", proc.pid, "--duration", "1", "--format", "json", timeout=60)
    assert rc == 0, err
    tool, cli = json_of(answer), parse_json(out, "gilty specialization --format json")
    assert tool["schema"] == cli["schema"] == "gilty.specialization.report/1"
    _same_shape(tool, cli, "specialization report")
    for key in ("requested_duration_s", "rate_hz", "read_interval_s", "partial_reason", "skipped"):
        assert tool["session"][key] == cli["session"][key], key
    assert (tool["session"]["requested_duration_s"], tool["session"]["rate_hz"]) == (1.0, 500.0)
    assert [p["pid"] for p in tool["session"]["processes"]] == [p["pid"] for p in cli["session"]["processes"]] == [proc.pid]
    # The target's hot sites, named by both (which of them rank first varies with the run).
    assert tool["sites"] and cli["sites"]
    assert set(tool["sites"][0]) == set(cli["sites"][0])
    hot = {s["qualname"] for s in tool["sites"]} & {s["qualname"] for s in cli["sites"]}
    assert hot, ([s["qualname"] for s in tool["sites"]], [s["qualname"] for s in cli["sites"]])
    assert error_of(refused).startswith("gilty: error: duration 0 s is out of bounds: a specialization run from the mcp server")
    assert log[0].count(f"gilty: sampling pid {proc.pid} ") == 1, log[0]
