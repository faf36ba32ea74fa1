"""`gilty serve -s` on a server that replaces its workers after every request (gunicorn
--max-requests 1) and whose master runs a short-lived thread before each fork: the number of series
must follow the live threads, not grow with the requests (docs/observability.md: series of dead
threads and processes end). The 10-minute version of this soak is bench/sidecar_soak.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, TARGETS, free_port, gilty_command, gilty_env

REQUESTS = 45
START_TIMEOUT_S = 60.0


def gunicorn() -> str:
    found = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or shutil.which("gunicorn")
    if found is None:
        pytest.skip("gunicorn not installed (requirements-dev.txt)")
    return found


def thread_series(port: int) -> set:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return set(
        re.findall(r'gilty_gil_hold_seconds_total\{pid="(\d+)",role="[^"]*",process="[^"]*",thread="[^"]*",tid="(\d+)"', text)
    )


def live_threads(master: int) -> int:
    pids = [master]
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(master):
                pids.append(int(entry))
        except (OSError, IndexError):
            continue
    total = 0
    for pid in pids:
        try:
            total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return total


def wait_until(check, what: str):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"{what} within {START_TIMEOUT_S:g} s")


def test_series_follow_live_threads_on_a_respawning_server():
    app_port, metrics_port = free_port(), free_port()
    server = subprocess.Popen(
        [
            gunicorn(),
            "-w",
            "2",
            "--max-requests",
            "1",
            "-b",
            f"127.0.0.1:{app_port}",
            "--chdir",
            str(TARGETS),
            "-c",
            str(TARGETS / "respawn_conf.py"),
            "respawn_app:app",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(REPO),
    )
    sidecar = None
    try:
        wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=5).read(), "gunicorn did not answer")
        sidecar = subprocess.Popen(
            [
                *gilty_command(),
                "serve",
                "-s",
                "--pid",
                str(server.pid),
                "--port",
                str(metrics_port),
                "--rate",
                "50",
                "--per-thread",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=gilty_env(),
        )
        wait_until(lambda: thread_series(metrics_port), "the sidecar served no series")
        counts = []
        for i in range(REQUESTS):
            urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=30).read()
            if i % 5 == 4:
                counts.append((len(thread_series(metrics_port)), live_threads(server.pid)))
        series = [s for s, _ in counts]
        most_live = max(live for _, live in counts)
        # Every request ended a worker (2 threads) and a master thread: without pruning the series
        # grow by about one per request. A thread ended in the last second may still be listed.
        assert max(series) <= most_live + 6, counts
        assert series[-1] < REQUESTS // 3, counts
    finally:
        for proc in (sidecar, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
