"""Whole servers (issue 7): a real gunicorn with sync workers and with uvicorn workers serving
FastAPI, installed from PyPI into a venv under /tmp by this test, loaded with a bounded number of
requests to 127.0.0.1, `--max-requests` small so a worker is respawned during the recording.

`gilty record --pid MASTER --subprocesses` must report every worker (the respawned one included)
with the handler in its stacks, and the master mostly idle; without `--subprocesses` the hint
appears.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import REPO, free_port, gilty_command, gilty_env, one_version, parse_json
from gilty.sampling.processes import HINT_CHILDREN_MIN, HINT_PARENT_MAX
from package_venvs import venv_python

pytestmark = [pytest.mark.interpreter, pytest.mark.alone]

APP_DIR = REPO / "tests" / "targets" / "server_app"
PACKAGES = ("gunicorn==23.0.0", "uvicorn==0.30.6", "fastapi==0.115.0")
MINORS = ("3.11", "3.12", "3.13", "3.14", "3.15")
WORKERS = 2
MAX_REQUESTS = 15
REQUESTS = 120  # bounded load, 4 at a time, each with a timeout


def _server_python(interp) -> str:
    if interp.path is None:
        pytest.skip(interp.skip_reason)
    if interp.id.startswith("debian") or interp.minor_str not in MINORS:
        pytest.skip(f"server tests run on pyenv {', '.join(MINORS)}, not {interp.id}")
    return venv_python(interp, "server", PACKAGES, "import gunicorn, uvicorn, fastapi")


def _children(pid: int) -> list:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return sorted(int(k) for k in f.read().split())
    except OSError:
        return []


class Server:
    def __init__(self, python: str, app: str, worker_class: str) -> None:
        self.port = free_port()
        self.log = Path(f"/tmp/gilty-server-{self.port}.log")
        args = [
            python,
            "-m",
            "gunicorn",
            "-w",
            str(WORKERS),
            "-k",
            worker_class,
            "-b",
            f"127.0.0.1:{self.port}",
            "--max-requests",
            str(MAX_REQUESTS),
            "--timeout",
            "60",
            "--graceful-timeout",
            "2",
            app,
        ]
        with open(self.log, "wb") as log:
            self.popen = subprocess.Popen(
                args, cwd=str(APP_DIR), stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        self.master = self.popen.pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                pytest.fail(f"gunicorn exited: {self.log.read_text(errors='replace')[-2000:]}")
            if len(_children(self.master)) == WORKERS and self._get():
                return
            time.sleep(0.2)
        self.stop()
        pytest.fail(f"gunicorn did not start: {self.log.read_text(errors='replace')[-2000:]}")

    def _get(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=10) as r:
                return r.status == 200
        except OSError:
            return False

    def load(self, n: int) -> int:
        with ThreadPoolExecutor(4) as pool:
            return sum(pool.map(lambda _: self._get(), range(n)))

    def stop(self) -> None:
        try:
            os.killpg(self.master, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait()
        self.log.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def server_python(interp):
    return _server_python(interp)


CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> tuple:
    """(own CPU s, CPU s of its reaped children) from /proc/PID/stat; (0, 0) once gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    # fields[0] is field 3: utime 14, stime 15, cutime 16, cstime 17
    return (int(fields[11]) + int(fields[12])) / CLK_TCK, (int(fields[13]) + int(fields[14])) / CLK_TCK


def _tree_cpu(master: int) -> tuple:
    """(master's CPU s, its workers' CPU s, the replaced workers it reaped included)."""
    own, reaped = _cpu_s(master)
    return own, reaped + sum(sum(_cpu_s(child)) for child in _children(master))


# After the load, gilty records this long before it is stopped (Ctrl-C): three of its rescans for
# children (every 0.3 s), so the workers alive at the end of the load are found.
AFTER_LOAD_S = 1.0


def _record_under_load(server: Server, *extra: str, requests: int = REQUESTS, until_load_ends: bool = False) -> tuple:
    """gilty records the server's tree while ``requests`` are sent: for 5 s from its start, or with
    ``until_load_ends`` from when it says it records until AFTER_LOAD_S after the last answer."""
    cpu_before, wall_before = _tree_cpu(server.master), time.monotonic()
    duration = "60" if until_load_ends else "5"
    proc = subprocess.Popen(
        gilty_command()
        + ["record", "--pid", str(server.master), "--duration", duration, "--rate", "200", "--format", "json", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=gilty_env(),
    )
    started = time.monotonic()
    head = b""
    if until_load_ends:
        for line in proc.stderr:
            head += line
            if line.startswith(b"gilty: recording"):
                break
    else:
        time.sleep(0.5)
    before = set(_children(server.master))
    ok = server.load(requests)
    if until_load_ends:
        during = set(_children(server.master))  # gilty runs on until told to stop: time to find them
        time.sleep(AFTER_LOAD_S)
        proc.send_signal(signal.SIGINT)
    else:
        # Workers alive now, while gilty has time left to find them (it rescans every 0.3 s).
        during = set(_children(server.master)) if time.monotonic() - started < 4.0 else set()
    out, err = proc.communicate(timeout=60)
    err = head + err
    cpu_after, wall = _tree_cpu(server.master), time.monotonic() - wall_before
    # Shares of one CPU over gilty's run, measured beside it: the reference for the hint.
    shares = tuple((b - a) / wall for a, b in zip(cpu_before, cpu_after))
    return proc.returncode, out.decode(), err.decode(), before | during, ok, shares


@pytest.mark.parametrize("worker_class,app", [("sync", "serverapp:wsgi"), ("uvicorn.workers.UvicornWorker", "serverapp:api")])
def test_server_workers_are_recorded_with_their_handler(interp, server_python, worker_class, app):
    if worker_class != "sync":
        # The sync worker runs the same handler on every version; the uvicorn worker adds an event
        # loop, whose frames and tasks test_asyncio_record.py reads on every version.
        one_version(interp, "the uvicorn worker's tree is found the sync worker's way")
    server = Server(server_python, app, worker_class)
    try:
        rc, out, err, seen, ok, _shares = _record_under_load(server, "--subprocesses", until_load_ends=True)
    finally:
        server.stop()
    assert rc == 0, err
    assert ok > REQUESTS // 2, f"only {ok} of {REQUESTS} requests succeeded"
    report = parse_json(out)
    recorded = {p["process"]["pid"] for p in report["processes"]}
    assert server.master in recorded
    workers = [p for p in report["processes"] if p["process"]["pid"] != server.master]
    # More workers than WORKERS: --max-requests replaced at least one during the recording.
    assert len(workers) > WORKERS, f"workers recorded: {[p['process'] for p in workers]}"
    assert any(p["process"]["exited"] for p in workers), "no worker exit was marked"
    assert seen <= recorded, f"workers alive during the recording but not recorded: {seen - recorded}"
    handler = [p for p in workers if any(f["function"] == "busy_handler" for t in p["threads"] for f in t["top_functions"])]
    assert len(handler) >= WORKERS, [p["process"] for p in workers]
    master = next(p for p in report["processes"] if p["process"]["pid"] == server.master)
    assert master["process"]["role"] == "master"
    assert master["gil_utilisation"] < 0.2, master["gil_utilisation"]


def test_without_subprocesses_the_hint_appears(interp, server_python):
    if interp.minor_str != "3.12":
        pytest.skip("the hint does not depend on the version: checked on pyenv 3.12 only (suite time)")
    server = Server(server_python, "serverapp:wsgi", "sync")
    try:
        # Busy enough that the workers use a good share of a CPU (~20 ms each) while the master idles.
        rc, out, err, _seen, _ok, (master_share, workers_share) = _record_under_load(server, requests=2 * REQUESTS)
    finally:
        server.stop()
    assert rc == 0, err
    report = parse_json(out)
    print(f"hint: master {master_share:.0%}, workers {workers_share:.0%} of a CPU; hints {report['hints']}")
    # The hint is for children using at least 20 % of a CPU while the parent idles. A machine too busy
    # to give the workers 1.5 times that (or that kept the master busy) cannot show it: say so.
    if workers_share < 1.5 * HINT_CHILDREN_MIN or master_share > HINT_PARENT_MAX / 2:
        pytest.skip(
            f"the machine gave the workers {workers_share:.0%} of a CPU and the master {master_share:.0%} "
            f"during the recording: too little to expect the --subprocesses hint (hints: {report['hints']})"
        )
    assert any("--subprocesses" in h for h in report["hints"]), (report["hints"], err)
    assert "hint:" in err
