"""uWSGI (pip-installed, built against the interpreter of .venv) with --processes 2 --threads 2: every
worker thread that serves a request shows the request's Python stack, the worker's main thread (core 0)
included. uWSGI forks its workers without PyOS_AfterFork_Child, so on 3.11+ a worker's main thread state
keeps its master's native thread id (tests/integration/test_stacks.py checks the same on every
interpreter with a target of its own)."""

from __future__ import annotations

import os
import re
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
        pytest.skip(
            f"uwsgi not installed at {UWSGI} (requirements-dev.txt; it builds with a C compiler and the interpreter's headers)"
        )
    port = free_port()
    log = open(tmp_path / "uwsgi.log", "wb")
    proc = subprocess.Popen(
        [
            str(UWSGI),
            "--http-socket",
            f"127.0.0.1:{port}",
            "--master",
            "--processes",
            "2",
            "--threads",
            "2",
            "--wsgi-file",
            str(TARGETS / "uwsgi_app.py"),
            "--disable-logging",
            "--die-on-term",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"uwsgi did not answer on 127.0.0.1:{port}: {(tmp_path / 'uwsgi.log').read_text(errors='replace')[-2000:]}"
                    )
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
        rc, out, err = run_gilty(
            "record", "--pid", proc.pid, "--subprocesses", "--duration", 2, "--rate", 200, "--format", "json"
        )
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
        assert ("serve_request", line) in functions or ("serve_request", line + 1) in functions, (
            main[0]["name"],
            main[0]["states"],
            functions,
        )


# -- issue 31: the --http router is a helper, not a worker -------------------------------------------

MIB = 1 << 20


def _listening_holder(pids: list, port: int):
    """The pid among ``pids`` holding the socket that listens on ``port`` (uWSGI's --http router)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in list(f)[1:]:
                cols = row.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] in inodes:
                    return pid
            except OSError:
                continue
    return None


@pytest.fixture(params=["preloaded", "lazy-apps"])
def routed_uwsgi(request, tmp_path):
    """uWSGI with --master --processes 3 and its --http router in front; the app builds 30 MiB at import.
    Yields (master pid, router pid, worker pids, port, lazy)."""
    if not UWSGI.exists():
        pytest.skip(
            f"uwsgi not installed at {UWSGI} (requirements-dev.txt; it builds with a C compiler and the interpreter's headers)"
        )
    lazy = request.param == "lazy-apps"
    port = free_port()
    log = open(tmp_path / "uwsgi.log", "wb")
    proc = subprocess.Popen(
        [
            str(UWSGI),
            "--master",
            "--processes",
            "3",
            "--http",
            f"127.0.0.1:{port}",
            "--wsgi-file",
            str(TARGETS / "uwsgi_ballast_app.py"),
            "--disable-logging",
            "--die-on-term",
        ]
        + (["--lazy-apps"] if lazy else []),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                kids = _workers(proc.pid)
                router = _listening_holder(kids, port)
                # With --lazy-apps each worker loads the app itself: one still importing it (a clean
                # clone's parallel part caught one) is not yet a worker like the others.
                ready = (tmp_path / "uwsgi.log").read_text(errors="replace").count("WSGI app 0 (mountpoint='') ready")
                if len(kids) == 4 and router is not None and ready >= (3 if lazy else 1):
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"uwsgi did not answer on 127.0.0.1:{port}: {(tmp_path / 'uwsgi.log').read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.2)
        yield proc.pid, router, [k for k in kids if k != router], port, lazy
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        log.close()


def test_uwsgi_http_router_is_a_helper_not_a_worker(routed_uwsgi):
    # Issue 31 item 2: "Each holds its own 0 MiB; ... about 1 MiB saved for 4 workers" against ~240 MiB:
    # the router (0.2 MiB of its own) counted as a worker and as the smallest one.
    master, router, workers, port, lazy = routed_uwsgi
    rc, out, err = run_gilty("memory", "--pid", master, "--duration", 2, "--format", "json")
    assert rc == 0, err
    report = parse_json(out, "gilty memory --format json")
    role = {p["pid"]: p["role"] for p in report["processes"]}
    assert role.get(router) == "helper", (router, role)
    assert sorted(pid for pid, r in role.items() if r == "worker") == sorted(workers), (router, role)
    helper = next(p for p in report["processes"] if p["pid"] == router)
    assert helper["helper"], helper.get("helper")
    preload = report["preload"]
    if lazy:
        # Each worker built its own 30 MiB of objects; the router none.
        assert preload["verdict"] == "not_preloaded", preload
        assert preload["footprint_per_worker_bytes"] >= 25 * MIB, preload
        assert preload["would_save_bytes"] >= 2 * 25 * MIB, preload
        for p in report["processes"]:
            if p["pid"] in workers:
                assert p["since_fork"]["private_bytes"] >= 25 * MIB, (p["pid"], p["since_fork"])
        said = next(s for s in report["summary"] if s.startswith("Not preloaded"))
        assert "for 3 workers" in said, said
    else:
        assert preload["verdict"] == "preloaded", preload
    assert any("(master, 3 workers and 1 helper)" in s for s in report["summary"]), report["summary"]

    # record -s: the process table lists the router as a helper beside the 3 workers.
    rc, out, err = run_gilty("record", "--pid", master, "--subprocesses", "--duration", 1, "--rate", 50, "--format", "json")
    assert rc == 0, err
    processes = {p["process"]["pid"]: p["process"] for p in parse_json(out, "gilty record -s --format json")["processes"]}
    recorded = {pid: p["role"] for pid, p in processes.items()}
    assert recorded.get(router) == "helper", (router, recorded)
    assert processes[router]["helper"].startswith(f"router: listens on :{port}"), processes[router]
    assert sorted(pid for pid, r in recorded.items() if r == "worker") == sorted(workers), (router, recorded)


# The router is told apart the same way with and without --lazy-apps (the memory test runs both): one server start.
@pytest.mark.parametrize("routed_uwsgi", ["lazy-apps"], indirect=True)
def test_load_profile_names_uwsgi_workers_behind_the_router(routed_uwsgi):
    # Issue 31 item 2: `gilty load --profile` said "1 worker answered (pid ...)": the router.
    master, router, workers, port, lazy = routed_uwsgi
    rc, out, err = run_gilty("load", f"http://127.0.0.1:{port}/", "--rate", 20, "--duration", 2, "--profile", master)
    assert rc == 0, err
    said = next((line for line in err.splitlines() if "answered" in line), "")
    assert all(str(w) in said for w in workers), (workers, said)
    assert f"router (pid {router})" in said, (router, said)
    assert f"through its router (pid {router})" in out, out
    # The step's profile counts the master and the 3 workers, not the router: "N/4 busy", "in 4".
    assert re.search(r"\d/4 busy", out) and re.search(r"MiB in 4\b", out), out
