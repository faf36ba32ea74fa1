"""`gilty compare A.json B.json` (issue 8, item 6) on real runs: the same configuration twice shows
no change beyond noise; a changed one (a slower server, a busier thread) is flagged on the figures
that changed and not on the others. Bad input is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import TARGETS, free_port, gilty_command, gilty_env
from timing_reference import TRANSPORT_S, Pressure, busy, quantile, within_server_time


def gilty(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([*gilty_command(), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=gilty_env())


def compare(a, b) -> dict:
    done = gilty("compare", a, b, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def flagged(result: dict) -> set:
    return {(r["scope"], r["metric"]) for r in result["rows"] if r["beyond_noise"]}


class LoadRun:
    """A `gilty load` run against a delay server it started, with what the server measured itself."""

    def __init__(self, tmp_path, name: str, delay: float):
        port = free_port()
        self.name, self.path = name, str(tmp_path / f"{name}.json")
        served_file = tmp_path / f"{name}-served.json"
        pressure = Pressure()
        done = gilty("load", f"http://127.0.0.1:{port}/", "--rate", 50, "--duration", 4, "-o", self.path,
                     "--", sys.executable, TARGETS / "http_delay_server.py", port, delay, "threads", served_file)
        self.pressure = pressure.share()
        assert done.returncode == 0, done.stderr
        with open(self.path) as f:
            step = json.load(f)["steps"][0]
        assert step["ok"] == step["sent"], step["errors"]
        # The server's times are in the order it answered: the measured step's requests come last,
        # after gilty's first request and the warmup.
        with open(served_file) as f:
            served = json.load(f)["served_s"][-step["ok"]:]
        self.p50, self.server_p50 = step["latency_s"]["p50"], quantile(served, 0.5)
        self.allowed = TRANSPORT_S + step["generator"]["lag_p99_s"]

    def check_median(self) -> str:
        return within_server_time(f"run {self.name}, latency p50", self.p50, self.server_p50, self.allowed, self.pressure)


def test_load_runs_side_by_side(tmp_path):
    a, again, slower = LoadRun(tmp_path, "a", 0.02), LoadRun(tmp_path, "again", 0.02), LoadRun(tmp_path, "slower", 0.03)
    # Each run's median is its server's own time plus the loopback and the generator's own lag: what
    # the runs measured is what compare is given. A run on a machine that could not hold that skips.
    measured = "; ".join(run.check_median() for run in (a, again, slower))
    print(measured)
    why = busy(max((run.pressure or 0.0) for run in (a, again, slower)))
    same = compare(a.path, again.path)
    assert same["compared"] == "load"
    step = "step 50 rps"
    # the median of a 20 ms server is steady to well under a millisecond: the same server twice is no
    # change, unless other jobs on the machine made the two runs differ
    if (step, "p50_s") in flagged(same) and why:
        pytest.skip(f"the machine was too busy to repeat a run ({why}): {measured}")
    assert (step, "p50_s") not in flagged(same), (same["rows"], measured)
    changed = compare(a.path, slower.path)
    rows = {(r["scope"], r["metric"]): r for r in changed["rows"]}
    median = rows[(step, "p50_s")]
    assert (median["a"], median["b"]) == (a.p50, slower.p50)
    # The servers' own medians differ by about 10 ms; each run's median lies within its allowance of
    # its server's, so the change does too.
    server_change = slower.server_p50 - a.server_p50
    assert server_change - a.allowed <= median["change"] <= server_change + slower.allowed, (median, measured)
    if (step, "p50_s") not in flagged(changed) and why:
        pytest.skip(f"the machine was too busy for a 10 ms change to stand out ({why}): {median}; {measured}")
    assert (step, "p50_s") in flagged(changed), (median, measured)
    assert median["direction"] == "worse"
    # the open loop keeps the rate: throughput is not a change
    assert (step, "throughput") not in flagged(changed)
    # the handler is busy 50 % longer per request: more server threads in do_GET
    endpoint = next(k for k in rows if k[0].startswith(f"{step} endpoint ") and "do_GET" in k[0] and k[1] == "server_threads")
    assert endpoint in flagged(changed), rows[endpoint]


def record(tmp_path, interp, name: str, busy: float) -> str:
    out = tmp_path / f"{name}.json"
    done = gilty("record", "--duration", 3, "--rate", 200, "-o", out, "--", interp.path, TARGETS / "duty_cycle.py", busy)
    assert done.returncode == 0, done.stderr
    return str(out)


@pytest.mark.interpreter
def test_recordings_side_by_side(tmp_path, interp):
    if interp.path is None:
        pytest.skip(interp.skip_reason)
    if interp.id.startswith("debian") or interp.minor_str != "3.12":
        pytest.skip("compare reads reports, whatever version recorded them: checked on pyenv 3.12 only (suite time)")
    a, again, busier = (record(tmp_path, interp, n, b) for n, b in (("a", 0.3), ("again", 0.3), ("busier", 0.7)))
    same = compare(a, again)
    assert same["compared"] == "recording"
    assert not any(k[0] == "thread worker" for k in flagged(same)), same["rows"]
    changed = compare(a, busier)
    rows = {(r["scope"], r["metric"]): r for r in changed["rows"]}
    assert {("thread worker", "holding_gil"), ("recording", "gil_utilisation")} <= flagged(changed), changed["rows"]
    assert 0.25 <= rows[("thread worker", "holding_gil")]["change"] <= 0.5
    # Its sleeping share falls by as much, but other jobs on the CPUs blur sleep into native and
    # runnable time, so only its direction is asserted.
    assert rows[("thread worker", "idle")]["change"] < -0.1
    assert ("thread MainThread", "idle") not in flagged(changed)


def test_bad_input_is_one_line(tmp_path):
    load = tmp_path / "load.json"
    load.write_text(json.dumps({"kind": "load", "steps": []}))
    rec = tmp_path / "notjson.json"
    rec.write_text("{")
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    for args, message in (
        ((tmp_path / "missing.json", load), "cannot read"),
        ((load, rec), "is not JSON"),
        ((load, other), "neither a `gilty load` nor a `gilty record`"),
        ((load, load), "nothing in common"),
    ):
        done = gilty("compare", *args)
        assert done.returncode == 2, done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and message in lines[0], done.stderr
