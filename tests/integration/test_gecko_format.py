"""`gilty record -o x.gecko.json` and `gilty report x.json -o x.gecko.json` against a real target, read
by the Firefox Profiler's own importer where node and npm are here.

spinners.py runs two threads in spin_forever(), taking the GIL from each other: each spinner's track
must carry holding_gil and waiting_gil markers and its samples the function.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import run_gilty, running_target
from formats_support import profiler_cli, recording_interpreter

DURATION_S = 1.5
RATE_HZ = 200


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{name: path} of x.gecko.json (recorded), x.json and its x-report.gecko.json, of one spinners.py."""
    interp = recording_interpreter()
    out = tmp_path_factory.mktemp("gecko")
    paths = {"recorded": out / "x.gecko.json", "json": out / "x.json", "rebuilt": out / "x-report.gecko.json"}
    with running_target(interp, "spinners.py") as proc:
        for key in ("recorded", "json"):
            rc, _out, err = run_gilty("record", "--pid", proc.pid, "--duration", DURATION_S, "--rate", RATE_HZ, "-o", paths[key])
            assert rc == 0, f"gilty record -o {paths[key].name} exited {rc}: {err}"
            assert f"gilty: wrote {paths[key]}" in err
    rc, _out, err = run_gilty("report", paths["json"], "-o", paths["rebuilt"])
    assert rc == 0, err
    paths["_pid"] = proc.pid
    return paths


def state_markers(thread: dict) -> list:
    m = thread["markers"]["schema"]
    return [
        (thread["stringTable"][row[m["name"]]], row[m["startTime"]], row[m["endTime"]], row[m["data"]])
        for row in thread["markers"]["data"]
        if row[m["data"]]["type"] == "GilState"
    ]


def test_recorded_file_shows_each_spinners_states(files):
    doc = json.loads(files["recorded"].read_text(encoding="utf-8"))
    assert doc["meta"]["version"] == 27 and doc["meta"]["interval"] == pytest.approx(1000 / RATE_HZ)
    spinners = [t for t in doc["threads"] if t["name"].startswith("spinner-")]
    assert {t["name"] for t in spinners} == {"spinner-1", "spinner-2"}
    for t in spinners:
        assert t["pid"] == files["_pid"]
        names = {name for name, *_ in state_markers(t)}
        assert {"holding_gil", "waiting_gil"} <= names, (t["name"], names)
        assert any(s.startswith("spin_forever (") and "spinners.py:" in s for s in t["stringTable"])
        times = [row[1] for row in t["samples"]["data"]]
        assert all(a < b for a, b in zip(times, times[1:]))
        assert times[-1] <= doc["meta"]["profilingEndTime"] <= (DURATION_S + 1.0) * 1000


def test_report_writes_the_json_reports_threads_and_states(files):
    report = json.loads(files["json"].read_text(encoding="utf-8"))
    doc = json.loads(files["rebuilt"].read_text(encoding="utf-8"))
    want = {(t["pid"], t["tid"]): t for t in report["threads"]}
    got = {(t["pid"], t["tid"]): t for t in doc["threads"]}
    assert set(got) == set(want)
    for key, t in got.items():
        assert t["name"] == want[key]["name"]
        samples = want[key]["samples"]
        assert len(t["samples"]["data"]) == samples
        markers = state_markers(t)
        for a, b in zip(markers, markers[1:]):  # a thread's markers follow each other in time
            assert a[2] <= b[1] + 1e-6
        for name, share in want[key]["states"].items():
            counted = sum(d["samples"] for n, _s, _e, d in markers if n == name)
            assert counted == pytest.approx(share * samples, abs=1), (key, name)  # shares are rounded


def load(script: Path, path: Path, env: dict, attempts: int = 4) -> None:
    """`profiler-cli load`, again when its daemon was slow to start: the tool gives a new daemon 500 ms,
    which a loaded CI machine can miss (seen once); it names the pid it left behind, stopped here."""
    for attempt in range(attempts):
        done = subprocess.run(["node", str(script), "load", str(path)], capture_output=True, text=True, timeout=120, env=env)
        if done.returncode == 0:
            return
        slow = re.search(r"did not become ready.*?running as pid (\d+)", done.stdout + done.stderr, re.S)
        assert slow and attempt + 1 < attempts, f"profiler-cli load: {done.stdout}{done.stderr}"
        try:
            os.kill(int(slow.group(1)), 9)
        except ProcessLookupError:
            pass


def test_the_firefox_profilers_importer_loads_it(files, pytestconfig):
    cache = getattr(pytestconfig, "cache", None)
    folder = cache.mkdir("gilty-profiler-cli") if cache is not None else Path(tempfile.mkdtemp(prefix="gilty-profiler-cli-"))
    script = profiler_cli(folder)
    sessions = Path(tempfile.mkdtemp(prefix="gk-"))  # a short path: it holds a Unix socket
    env = {**os.environ, "PROFILER_CLI_SESSION_DIR": str(sessions), "PROFILER_CLI_NO_SYMBOLICATE": "1"}

    def cli(*args: str) -> str:
        done = subprocess.run(["node", str(script), *args], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, f"profiler-cli {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    try:
        load(script, files["recorded"], env)
        info = cli("profile", "info")
        threads = {name: (handle, int(tid)) for handle, name, tid in re.findall(r"(t-\d+): (\S+) \[tid (\d+)\]", info)}
        assert {"spinner-1", "spinner-2"} <= set(threads), info
        assert f"[pid {files['_pid']}]" in info
        for name in ("spinner-1", "spinner-2"):
            cli("thread", "select", threads[name][0])
            markers = cli("thread", "markers")
            assert "holding_gil" in markers and "waiting_gil" in markers and "on_cpu" in markers, markers
            assert "Holding the GIL" in markers and "Waiting for the GIL" in markers  # the categories
            tree = cli("thread", "samples-top-down")
            assert "spin_forever" in tree and "holding_gil" in tree, tree
    finally:
        subprocess.run(["node", str(script), "stop", "--all"], capture_output=True, timeout=60, env=env)
