"""gunicorn in prometheus_client multiprocess mode with gilty's exporter (issue 10, "two lines in the
gunicorn config"): real gunicorn sync workers, gilty installed from the wheel, two spinning threads
per worker. /metrics (MultiProcessCollector over every worker's files) must carry each worker's hold
and wait by pid and thread, GC pauses, and memory gauges; a killed worker's gauges go, its
replacement's series appear."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request

import pytest
from conftest import AVAILABLE, TARGETS, free_port
from timing_reference import Pressure, assert_unless_busy
from wheel_env import venv_with_wheel

pytestmark = pytest.mark.alone

prometheus_parser = pytest.importorskip(
    "prometheus_client.parser", reason="prometheus_client not installed (requirements-dev.txt)"
)

WORKERS = 2
PACKAGES = ("gunicorn==23.0.0", "prometheus-client>=0.20")


def _interp():
    """One interpreter is enough for the exporter (the monitor is tested on each in test_monitor)."""
    found = [i for i in AVAILABLE if not i.id.startswith("debian") and i.minor_str == "3.12"]
    if not found:
        pytest.skip("needs pyenv's CPython 3.12 (gunicorn multiprocess test runs on one interpreter)")
    return found[0]


def _workers(master: int) -> list:
    try:
        with open(f"/proc/{master}/task/{master}/children") as f:
            return sorted(int(k) for k in f.read().split())
    except OSError:
        return []


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=20) as r:
        return r.read().decode()


def _samples(text: str) -> list:
    return [s for family in prometheus_parser.text_string_to_metric_families(text) for s in family.samples]


def _by_worker(samples: list, name: str) -> dict:
    """{(worker_pid, thread): value} of one counter sample name."""
    return {(s.labels["worker_pid"], s.labels["thread"]): s.value for s in samples if s.name == name}


@pytest.fixture
def server(tmp_path):
    python = venv_with_wheel(_interp(), *PACKAGES) / "bin" / "python"
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    port = free_port()
    log = tmp_path / "gunicorn.log"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "PYTHONPATH": str(TARGETS)}
    with open(log, "wb") as out:
        popen = subprocess.Popen(
            [
                str(python),
                "-m",
                "gunicorn",
                "-w",
                str(WORKERS),
                "-b",
                f"127.0.0.1:{port}",
                "--timeout",
                "60",
                "-c",
                str(TARGETS / "gunicorn_metrics_conf.py"),
                "gunicorn_metrics_app:app",
            ],
            cwd=str(TARGETS),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if popen.poll() is not None:
                pytest.fail(f"gunicorn exited: {log.read_text(errors='replace')[-2000:]}")
            if len(_workers(popen.pid)) == WORKERS:
                try:
                    _get(port, "/metrics")
                    break
                except OSError:
                    pass
            time.sleep(0.3)
        else:
            pytest.fail(f"gunicorn did not start: {log.read_text(errors='replace')[-2000:]}")
        yield popen, port, log
    finally:
        os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout=15)


def _wait_for(predicate, timeout: float = 30.0, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    return predicate()


def test_every_worker_exports_hold_wait_gc_and_memory(server):
    popen, port, log = server
    pids = {str(p) for p in _workers(popen.pid)}

    # Series appear once each worker's exporter has run (0.5 s period) with its spinners seen.
    def spinners_everywhere():
        holds = _by_worker(_samples(_get(port, "/metrics")), "gilty_gil_hold_seconds_total")
        return holds if {(p, f"spinner-{i}") for p in pids for i in range(2)} <= holds.keys() else None

    assert _wait_for(spinners_everywhere), log.read_text(errors="replace")[-2000:]
    first = _samples(_get(port, "/metrics"))
    pressure = Pressure()
    time.sleep(3.0)
    for _ in range(4):
        _get(port, "/gc")
    time.sleep(1.5)
    second = _samples(_get(port, "/metrics"))
    hold0, hold1 = _by_worker(first, "gilty_gil_hold_seconds_total"), _by_worker(second, "gilty_gil_hold_seconds_total")
    wait0, wait1 = _by_worker(first, "gilty_gil_wait_seconds_total"), _by_worker(second, "gilty_gil_wait_seconds_total")
    for pid in pids:
        for i in range(2):
            key = (pid, f"spinner-{i}")
            hold, wait = hold1[key] - hold0[key], wait1[key] - wait0[key]
            # Two spinners of one worker take turns: each holds about half of the time it is not idle.
            assert_unless_busy(hold + wait >= 2.0, pressure, f"{key}: held {hold:.3f} s, waited {wait:.3f} s")
            # The kernel decides who runs when 2 CPUs are shared by more: turns stay fair only on a
            # machine that can run them.
            assert_unless_busy(0.3 <= hold / (hold + wait) <= 0.7, pressure, f"{key}: held {hold:.3f} s, waited {wait:.3f} s")
    gc_counts = {s.labels["worker_pid"]: s.value for s in second if s.name == "gilty_gc_pause_seconds_count"}
    assert sum(gc_counts.values()) >= 1, gc_counts
    assert set(gc_counts) <= pids
    private = {s.labels["pid"]: s.value for s in second if s.name == "gilty_process_private_bytes"}
    shared = {s.labels["pid"]: s.value for s in second if s.name == "gilty_process_shared_bytes"}
    assert set(private) == set(shared) == pids, (private, shared)
    assert all(v > 0 for v in private.values()) and all(v > 0 for v in shared.values())


def test_a_replaced_worker_leaves_and_its_successor_appears(server):
    popen, port, log = server
    before = _workers(popen.pid)
    victim = before[0]
    os.kill(victim, signal.SIGKILL)
    successor = _wait_for(lambda: [p for p in _workers(popen.pid) if p not in before and len(_workers(popen.pid)) == WORKERS])
    assert successor, f"gunicorn did not replace worker {victim}: {log.read_text(errors='replace')[-2000:]}"

    def successor_exported():
        samples = _samples(_get(port, "/metrics"))
        holds = _by_worker(samples, "gilty_gil_hold_seconds_total")
        return samples if (str(successor[0]), "spinner-0") in holds else None

    samples = _wait_for(successor_exported)
    assert samples, log.read_text(errors="replace")[-2000:]
    live = {s.labels["pid"] for s in samples if s.name == "gilty_process_private_bytes"}
    assert str(victim) not in live and str(successor[0]) in live, live
