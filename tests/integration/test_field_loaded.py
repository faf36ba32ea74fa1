"""Third-party servers on a loaded host: what gilty says about their workers must match the kernel.

The workers of a registry-installed server share their CPU with a pinned CPU hog (httpbin under
gunicorn's sync workers) or run under a cgroup CPU quota (FastAPI under uvicorn), while a client
pinned to the other CPU keeps them busy. gilty runs on that other CPU too. The truth is the kernel's
run delay of each worker's main thread (schedstat, read by the test over the recording): its
`cpu_wait` must match it, and the time the kernel held the thread off must not turn into GIL waiting
(a sync worker has one thread; no other thread can hold its GIL) or into native code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import TARGETS, free_port, gilty_command, one_version
from package_venvs import venv_python
from test_cpu_starved import STARVED_MIN, TARGET_CPU, TOLERANCE, _quota_group, record_beside_the_kernel
from test_load_httpbin import HTTPBIN_PACKAGES, _httpbin_base
from test_specialization_server import _get as _up

pytestmark = pytest.mark.alone

SERVER_PACKAGES = ("gunicorn==23.0.0", "uvicorn==0.30.6", "fastapi==0.115.0")
DURATION_S = 6.0
WORKERS = 2


def _other_cpus() -> str:
    cpus = sorted(os.sched_getaffinity(0) - {TARGET_CPU})
    if not cpus:
        pytest.skip("needs two CPUs: one for the workers and their hog, one for gilty and the client")
    return ",".join(map(str, cpus))


def _children(pid: int) -> list:
    with contextlib.suppress(OSError):
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


@contextlib.contextmanager
def _server(argv: list, url: str, workers: int, group=None):
    """The server pinned to TARGET_CPU (its workers inherit it), in cgroup ``group`` if given (the shell
    moves itself there before it execs the server, so every worker starts inside), and a client on
    the other CPU(s)."""
    log = tempfile.TemporaryFile()
    pinned = ["taskset", "-c", str(TARGET_CPU), *argv]
    if group is not None:
        pinned = ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", *pinned]
    server = subprocess.Popen(pinned, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    client = None
    try:
        deadline = time.monotonic() + 90
        while not (len(_children(server.pid)) >= workers and _up(url)):
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"server did not start: {log.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.2)
        loop = (
            "import threading, urllib.request\n"
            "def get():\n"
            "    while True:\n"
            "        try:\n"
            f"            urllib.request.urlopen({url!r}, timeout=30).read()\n"
            "        except OSError:\n"
            "            pass\n"
            "for _ in range(4): threading.Thread(target=get, daemon=True).start()\n"
            "threading.Event().wait()\n"
        )
        client = subprocess.Popen(
            ["taskset", "-c", _other_cpus(), sys.executable, "-c", loop],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # workers busy before the recording
        yield server
    finally:
        for p in (client, server):
            if p is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL) if p is server else p.kill()
            p.wait()
        log.close()


def _record_tree(master: int) -> tuple:
    """(JSON report of `record -s`, {tid: kernel run delay share over the recording})."""
    cmd = [
        "taskset",
        "-c",
        _other_cpus(),
        *gilty_command(),
        "record",
        "--pid",
        str(master),
        "-s",
        "--duration",
        str(DURATION_S),
        "--format",
        "json",
    ]
    return record_beside_the_kernel(cmd, lambda: [master, *_children(master)])


def _worker_mains(report: dict) -> list:
    mains = [
        (p, t) for p in report["processes"] if p["process"]["role"] == "worker" for t in p["threads"] if t["name"] == "MainThread"
    ]
    assert len(mains) >= WORKERS, [(p["process"]["pid"], p["process"]["role"]) for p in report["processes"]]
    return mains


def _judge(mains: list, kernel: dict, what: str) -> None:
    for proc, t in mains:
        share = kernel.get(t["tid"])
        assert share is not None, f"worker {proc['process']['pid']}: no schedstat for {t['tid']}"
        if share < STARVED_MIN:
            pytest.skip(f"worker {proc['process']['pid']} was not starved (run delay {share:.0%}): nothing to judge")
        states = t["states"]
        print(
            f"{what} worker {proc['process']['pid']}: cpu_wait {states['cpu_wait']:.3f}, kernel run delay "
            f"{share:.3f}, waiting_gil {states['waiting_gil']:.3f}, native {states['native']:.3f}"
        )
        assert abs(states["cpu_wait"] - share) <= TOLERANCE, (
            f"{what} worker {proc['process']['pid']}: cpu_wait {states['cpu_wait']:.3f} against the kernel's run "
            f"delay {share:.3f}; states {states}"
        )
        # One Python thread: nothing else can hold its GIL. Held off by the kernel is not a GIL wait.
        assert states["waiting_gil"] <= 0.02, f"{what}: {states}"


def test_httpbin_sync_workers_beside_a_cpu_hog():
    python = venv_python(_httpbin_base(), "httpbin", HTTPBIN_PACKAGES, "import httpbin, gunicorn")
    gunicorn = str(Path(python).parent / "gunicorn")
    port = free_port()
    hog = subprocess.Popen(["taskset", "-c", str(TARGET_CPU), sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
    try:
        with _server(
            [gunicorn, "-w", str(WORKERS), "-b", f"127.0.0.1:{port}", "httpbin:app"],
            f"http://127.0.0.1:{port}/bytes/20000",
            WORKERS,
        ) as server:
            report, kernel = _record_tree(server.pid)
    finally:
        hog.kill()
        hog.wait()
    mains = _worker_mains(report)
    _judge(mains, kernel, "httpbin+hog")
    for proc, t in mains:
        # Their time in Python is httpbin's view, under the hog as on a quiet host.
        assert t["states"]["native"] <= 0.25, t["states"]
    for proc, t in mains:
        # Under the hog as on a quiet host, the worker's time in Python is the view's work: the random
        # module called from httpbin's `random_bytes`, not the framework or the kernel's wait.
        held = [f for f in t["top_functions"] if f["state"] == "holding_gil"]
        assert held and (held[0]["file"] or "").endswith(("random.py", "httpbin/core.py")), held


def test_fastapi_uvicorn_workers_under_a_cgroup_quota(interp):
    one_version(
        interp, "one server under a quota is enough; cpu_wait is checked per version in test_cpu_starved.py (a starved spinner)"
    )
    python = venv_python(interp, "server", SERVER_PACKAGES, "import uvicorn, fastapi")
    port = free_port()
    with _quota_group(0.2) as group:
        argv = [
            python,
            "-m",
            "uvicorn",
            "spec_service:app",
            "--app-dir",
            str(TARGETS),
            "--port",
            str(port),
            "--workers",
            str(WORKERS),
            "--log-level",
            "warning",
        ]
        with _server(argv, f"http://127.0.0.1:{port}/", WORKERS, group) as server:
            report, kernel = _record_tree(server.pid)
    mains = _worker_mains(report)
    _judge(mains, kernel, "fastapi+quota")
    sat = report["saturation"]
    assert sat["cgroup_periods"] and sat["cgroup_throttled_share"] >= 0.2, sat
