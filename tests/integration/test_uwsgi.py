"""uWSGI (pip-installed, built against the interpreter of .venv) with --processes 2 --threads 2: every
worker thread that serves a request shows the request's Python stack, the worker's main thread (core 0)
included. uWSGI forks its workers without PyOS_AfterFork_Child, so on 3.11+ a worker's main thread state
keeps its master's native thread id (tests/integration/test_stacks.py checks the same on every
interpreter with a target of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import TARGETS, free_port, line_of, parse_json, run_gilty

UWSGI = Path(sys.executable).parent / "uwsgi"


def _workers(master: int) -> list:
    try:
        with open(f"/proc/{master}/task/{master}/children") as f:
            return sorted(int(k) for k in f.read().split())
    except OSError:
        return []


@pytest.fixture
def uwsgi_server(tmp_path):
    if not UWSGI.exists():
        pytest.skip(f"uwsgi not installed at {UWSGI} (requirements-dev.txt; it builds with a C compiler and the interpreter's headers)")
    port = free_port()
    log = open(tmp_path / "uwsgi.log", "wb")
    proc = subprocess.Popen(
        [str(UWSGI), "--http-socket", f"127.0.0.1:{port}", "--master", "--processes", "2", "--threads", "2",
         "--wsgi-file", str(TARGETS / "uwsgi_app.py"), "--disable-logging", "--die-on-term"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"uwsgi did not answer on 127.0.0.1:{port}: {(tmp_path / 'uwsgi.log').read_text(errors='replace')[-2000:]}")
                time.sleep(0.2)
        yield proc, port
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        log.close()


def test_every_uwsgi_worker_thread_serving_a_request_has_its_stack(uwsgi_server):
    proc, port = uwsgi_server
    stop = threading.Event()

    def load():
        while not stop.is_set():
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
            except OSError:
                time.sleep(0.05)

    clients = [threading.Thread(target=load, daemon=True) for _ in range(4)]
    for c in clients:
        c.start()
    try:
        rc, out, err = run_gilty("record", "--pid", proc.pid, "--subprocesses", "--duration", 2, "--rate", 200, "--format", "json")
    finally:
        stop.set()
        for c in clients:
            c.join(10)
    assert rc == 0, err
    report = parse_json(out, "gilty record -s --format json")
    workers = [p for p in report["processes"] if p["process"]["pid"] in _workers(proc.pid)]
    assert len(workers) == 2, [p["process"] for p in report["processes"]]
    line = line_of("uwsgi_app.py", "serve_request")
    for worker in workers:
        main = [t for t in worker["threads"] if t["tid"] == worker["process"]["pid"]]
        assert len(main) == 1, [t["name"] for t in worker["threads"]]
        functions = {(f["function"], f["line"]) for f in main[0]["top_functions"]}
        assert ("serve_request", line) in functions or ("serve_request", line + 1) in functions, (main[0]["name"], main[0]["states"], functions)
