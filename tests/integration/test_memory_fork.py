"""`gilty memory` since fork, and preloaded or not (issue 21), on real prefork trees:

- a `multiprocessing` pool whose workers built their data (initializer) before gilty starts: the
  per-worker "private since fork" figure must match the kernel's own count (`Private_Clean +
  Private_Dirty` of /proc/PID/smaps_rollup, read by the test right after the run) within
  2 MiB + 5 %, where the growth during the recording reads ~0; the workers read "not preloaded";
- gunicorn (from PyPI) serving tests/targets/prefork_app with and without --preload: preload named
  correctly, "--preload would save" only without it, the same since-fork tolerance;
- no warning about full collections copying the heap when no worker ran a full collection.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import TARGETS, note, run_gilty
from pool_support import running_pool
from test_memory import WORKERS, _children, _free_port, _gunicorn_python, mib, proc_of, run_memory

MIB = 1 << 20
# Since fork vs the kernel's count: private pages outside the copy-on-write mappings (the stack) and
# what a worker allocates between gilty's last comparison and the test's read.
TOLERANCE_BYTES = 2 * MIB
TOLERANCE_SHARE = 0.05
APP_DIR = TARGETS / "prefork_app"
APP_RECORDS = "40000"  # ~35 MiB of heap: quick to build, far above the tolerance
POOL_RECORDS = "100000"  # ~30 MiB per pool worker


def _private(pid: int) -> int:
    """Private_Clean + Private_Dirty of the process, from the kernel (the reference)."""
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1]) * 1024
    return total


def _check_since_fork(interp, label: str, report: dict, workers: list, reference: dict) -> None:
    for pid in workers:
        since = proc_of(report, pid)["since_fork"]
        assert since is not None, f"worker {pid}: no since-fork figures"
        ref = reference[pid]
        note(interp, f"{label}: private since fork MiB", mib(since["private_bytes"]))
        note(interp, f"{label}: kernel's private MiB", mib(ref))
        assert abs(since["private_bytes"] - ref) <= TOLERANCE_BYTES + TOLERANCE_SHARE * ref, (pid, since, ref)


def _no_full_collection_warning_without_one(report: dict) -> None:
    for w in report["warnings"]:
        if w["code"] != "worker_gc_unfrozen":
            continue
        for pid in w["pids"]:
            g = proc_of(report, pid)["gc"]
            full = max((g["collections_during_run"] or [0, 0, 0])[2], g["windows_by_generation"]["2"])
            assert full > 0, f"worker {pid} warned about full collections with none: {w['message']}"


def _stop_group(popen: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(popen.pid, sig)
        except ProcessLookupError:
            break
        try:
            popen.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            continue


# -- a multiprocessing pool ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool_run(interp):
    if interp.path is None:
        pytest.skip(interp.skip_reason)
    with running_pool(interp.path, 3, POOL_RECORDS) as (master, workers):
        rc, report, err, _ = run_memory(master, 2.0)
        reference = {w: _private(w) for w in workers}
        assert rc == 0 and report, f"gilty memory exited {rc}:\n{err}"
        yield report, workers, reference


# Guards: growth counted from when gilty first saw a worker (the pool's warm workers read +0.0 MiB
# where each had built ~30 MiB since fork).
@pytest.mark.interpreter
def test_pool_private_since_fork_matches_the_kernel(interp, pool_run):
    report, workers, reference = pool_run
    _check_since_fork(interp, "pool", report, workers, reference)
    for pid in workers:
        p = proc_of(report, pid)
        note(interp, "pool: growth during the run MiB", mib(p["cow"]["private_growth_bytes"]))
        assert p["since_fork"]["new_bytes"] >= 10 * MIB, p["since_fork"]


# Guards: "the preloaded heap stays shared" said of workers that built their memory themselves.
@pytest.mark.interpreter
def test_pool_workers_that_built_their_data_are_not_preloaded(pool_run):
    report, _, _ = pool_run
    assert report["preload"]["verdict"] == "not_preloaded", report["preload"]
    assert report["preload"]["would_save_bytes"] >= 2 * 10 * MIB, report["preload"]
    assert not any("preloaded heap stays shared" in s for s in report["summary"]), report["summary"]


# Guards: the full-collection warning firing with 0 full collections and 0 MiB copied.
@pytest.mark.interpreter
def test_pool_no_full_collection_warning_without_one(pool_run):
    report, _, _ = pool_run
    _no_full_collection_warning_without_one(report)


# Guards (issue 31): "The master froze 375 objects (gc.freeze())" when nothing called gc.freeze(): a fresh
# 3.12 has 375 objects in its permanent generation, and this master has run no full collection yet.
@pytest.mark.interpreter
def test_pool_master_that_never_called_freeze_is_not_said_to_have(pool_run):
    report, _, _ = pool_run
    master = report["processes"][0]
    assert master["role"] == "master" and master["gc"]["froze_little"] is True, master["gc"]
    assert not any("froze " in s for s in report["summary"]), report["summary"]


# Guards (issue 31): multiprocessing's resource tracker (a spawn pool starts one) counted as a worker.
@pytest.mark.interpreter
def test_spawn_pool_resource_tracker_is_a_helper(interp):
    from conftest import one_version, parse_json

    one_version(interp, "telling multiprocessing's resource tracker from the pool's workers reads only /proc")
    with running_pool(interp.path, 2, "20000", start="spawn") as (master, workers):
        tracker = [k for k in _children(master) if k not in workers]
        assert len(tracker) == 1, (master, workers, _children(master))
        rc, report, err, _ = run_memory(master, 1.0)
        assert rc == 0 and report, err
        role = {p["pid"]: p["role"] for p in report["processes"]}
        assert role == {master: "master", workers[0]: "worker", workers[1]: "worker", tracker[0]: "helper"}, role
        assert proc_of(report, tracker[0])["helper"] == "multiprocessing's resource tracker"
        rc, out, err = run_gilty("record", "--pid", master, "--subprocesses", "--duration", 0.5, "--rate", 20, "--format", "json")
        assert rc == 0, err
        recorded = {p["process"]["pid"]: p["process"]["role"] for p in parse_json(out)["processes"]}
        assert recorded.get(tracker[0]) == "helper", recorded


# -- gunicorn with and without --preload ----------------------------------------------------------------


class Gunicorn:
    """gunicorn serving prefork_app with WORKERS sync workers, with or without --preload."""

    def __init__(self, python: str, preload: bool) -> None:
        self.port = _free_port()
        args = [
            python,
            "-m",
            "gunicorn",
            "-w",
            str(WORKERS),
            "-b",
            f"127.0.0.1:{self.port}",
            "--timeout",
            "120",
            "--graceful-timeout",
            "5",
            "--log-level",
            "warning",
        ]
        args += ["--preload"] if preload else []
        args.append("app:app")
        env = dict(os.environ, PYTHONPATH=str(APP_DIR), PREFORK_APP_RECORDS=APP_RECORDS, PYTHONUNBUFFERED="1")
        for var in ("PYTHONHOME", "PYTHONSTARTUP", "GILTY_PREFORK_GC"):
            env.pop(var, None)
        self.log = Path(f"/tmp/gilty-forktest-{self.port}.log")
        with open(self.log, "wb") as log:
            self.popen = subprocess.Popen(
                args, cwd=str(APP_DIR), env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        self.master = self.popen.pid

    def wait_ready(self) -> list:
        """The workers, once they answer and their private memory has settled (imports done); bounded."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                pytest.fail(f"gunicorn exited: {self.log.read_text(errors='replace')[-2000:]}")
            kids = _children(self.master)
            if len(kids) == WORKERS:
                seen = set()
                for _ in range(4 * WORKERS):
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=10) as r:
                            seen.add(json.loads(r.read())["pid"])
                    except OSError:
                        break
                # A worker that has not answered yet may still be importing: its private memory must settle.
                if seen:
                    sizes = {k: _private(k) for k in kids}
                    time.sleep(1.0)
                    if all(abs(_private(k) - sizes[k]) < MIB for k in kids):
                        return kids
            time.sleep(0.3)
        pytest.fail("gunicorn workers did not settle")

    def stop(self) -> None:
        _stop_group(self.popen)
        self.log.unlink(missing_ok=True)


@pytest.fixture(scope="module", params=["preload", "no_preload"])
def gunicorn_run(request, interp):
    python = _gunicorn_python(interp)
    server = Gunicorn(python, preload=request.param == "preload")
    try:
        workers = server.wait_ready()
        rc, report, err, _ = run_memory(server.master, 2.0)
        reference = {w: _private(w) for w in workers}
        assert rc == 0 and report, f"gilty memory exited {rc}:\n{err}"
        rc, text, err = run_gilty("memory", "--pid", server.master, "--duration", "1", timeout=60)
        assert rc == 0, err
        yield request.param, report, workers, reference, text
    finally:
        server.stop()


# Guards: preload never detected ("little was copied: the preloaded heap stays shared" without --preload,
# no "--preload would save").
@pytest.mark.interpreter
def test_gunicorn_preload_is_named(interp, gunicorn_run):
    mode, report, workers, reference, text = gunicorn_run
    pre = report["preload"]
    note(interp, f"gunicorn {mode}: --preload would save MiB", mib(pre["would_save_bytes"] or 0))
    if mode == "preload":
        assert pre["verdict"] == "preloaded", pre
        assert "--preload would" not in text
    else:
        assert pre["verdict"] == "not_preloaded" and pre["app_module"] == "app", pre
        assert pre["would_save_bytes"] >= (WORKERS - 1) * 20 * MIB, pre
        assert "--preload would" in text and "preloaded heap stays shared" not in text, text


# Guards: since-fork figures missing or off (warm workers read 0 during the recording).
@pytest.mark.interpreter
def test_gunicorn_private_since_fork_matches_the_kernel(interp, gunicorn_run):
    mode, report, workers, reference, _ = gunicorn_run
    _check_since_fork(interp, f"gunicorn {mode}", report, workers, reference)


@pytest.mark.interpreter
def test_gunicorn_no_full_collection_warning_without_one(gunicorn_run):
    _, report, _, _, _ = gunicorn_run
    _no_full_collection_warning_without_one(report)
