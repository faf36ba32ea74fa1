"""A target held to fewer CPUs than the host has, by its affinity (taskset) or by its cpuset (a
container's `--cpuset-cpus`), is said so in the saturation line (issue 31, item 13): such a process is
starved at a host load that would leave others room, and the run-queue figures alone do not say why."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import record_json

SPIN = "import time\nwhile True:\n    time.sleep(0.001)\n"
CPUSET_ROOT = Path("/sys/fs/cgroup/cpuset")


@contextlib.contextmanager
def _target(*prefix: str):
    proc = subprocess.Popen([*prefix, sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _saturation_line(report: dict) -> str:
    (process,) = report["processes"]
    return process["saturation"]["line"]


def test_a_target_pinned_by_affinity_is_said_to_be():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to pin a target to one of them")
    with _target("taskset", "-c", "0") as proc:
        report = record_json(proc.pid, duration=1.0, rate=100.0)
    line = _saturation_line(report)
    # before: "host CPU not saturated: run queue delay 0 ms/s per thread; no cgroup CPU quota seen"
    assert f"may run on 1 of the host's {os.cpu_count()} CPUs (its affinity)" in line, line
    with _target() as proc:
        free = _saturation_line(record_json(proc.pid, duration=1.0, rate=100.0))
    assert "may run on" not in free, free


@contextlib.contextmanager
def _cpuset_group(cpu: int):
    if os.geteuid() != 0:
        pytest.skip("creating a cpuset needs root")
    if not (CPUSET_ROOT / "cpuset.cpus").exists():
        pytest.skip(f"no cgroup v1 cpuset controller at {CPUSET_ROOT}")
    group = CPUSET_ROOT / f"gilty-test-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cpuset.cpus").write_text(str(cpu))
        (group / "cpuset.mems").write_text((CPUSET_ROOT / "cpuset.mems").read_text().strip())
    except OSError as e:
        pytest.skip(f"cannot create a cpuset under {CPUSET_ROOT}: {e}")
    try:
        yield group
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (CPUSET_ROOT / "cgroup.procs").write_text(pid)
        group.rmdir()


def test_a_target_in_a_one_cpu_cpuset_is_said_to_be():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to hold a target to one of them")
    with _cpuset_group(0) as group, _target() as proc:
        (group / "cgroup.procs").write_text(str(proc.pid))
        line = _saturation_line(record_json(proc.pid, duration=1.0, rate=100.0))
    assert f"may run on 1 of the host's {os.cpu_count()} CPUs (its cpuset)" in line, line
