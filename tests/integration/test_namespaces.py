"""A target in its own PID, user and mount namespaces, as a container runtime starts it, read by a gilty
outside them (a sidecar): issue 31, item 16. Inside, `threading.get_native_id()` of the main thread is 1
while /proc lists it under its host tid, and every thread read "(no Python stack)": thread states were
matched to threads by the namespaced id. The script runs from a tmpfs mounted inside the namespace, so
its path does not exist outside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import DEBIAN_PYTHON, TARGETS, TargetProcess, one_version, parse_json, run_gilty

READY_TIMEOUT_S = 30.0


def _children(pid: int) -> list:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@contextlib.contextmanager
def namespaced_target(python: str, script: str, inner_dir: Path, copy_python: bool = False):
    """(unshare's pid, the Python process's host pid) for ``script`` run under new PID, user and mount
    namespaces from a tmpfs mounted on ``inner_dir`` there (``python`` too with ``copy_python``);
    everything is killed on exit."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare")
    inner_dir.mkdir()
    copy = f"cp {python} {inner_dir}/python && " if copy_python else ""
    run = f"{inner_dir}/python" if copy_python else python
    shell = f"mount -t tmpfs gilty-ns {inner_dir} && {copy}cp {TARGETS / script} {inner_dir}/ && exec {run} {inner_dir / script}"
    fd, err_path = tempfile.mkstemp(prefix="gilty-ns-", suffix=".err")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    popen = subprocess.Popen(
        ["unshare", "--pid", "--kill-child", "--map-root-user", "--mount-proc", "sh", "-c", shell],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=fd,
        env=env,
    )
    os.close(fd)
    proc = TargetProcess(popen, TARGETS / script, err_path)
    try:
        line = proc.read_line(READY_TIMEOUT_S)
        if line.strip() != b"ready":
            err = proc.stderr_text()
            if "Operation not permitted" in err or "unshare failed" in err:
                pytest.skip(f"this host does not allow new namespaces here: {err.strip()}")
            pytest.fail(f"{script} in its namespaces did not print 'ready' (got {line!r}); stderr:\n{err}")
        (python_pid,) = _children(popen.pid)
        status = Path(f"/proc/{python_pid}/status").read_text()
        nspid = next(line for line in status.splitlines() if line.startswith("NSpid:")).split()[1:]
        assert nspid[-1] == "1" and len(nspid) >= 2, f"not in its own PID namespace: {nspid}"
        yield popen.pid, python_pid
    finally:
        proc.stop()


def test_dump_of_a_process_in_its_own_pid_namespace(interp, tmp_path):
    one_version(interp, "namespaces are kernel behaviour; thread mapping is version-independent")
    inner = tmp_path / "inside"
    with namespaced_target(interp.path, "known_stack.py", inner) as (_, pid):
        assert not (inner / "known_stack.py").exists()  # only inside the mount namespace
        code, out, err = run_gilty("dump", "--pid", pid)
    assert code == 0, err
    assert "(no Python stack)" not in out, out
    assert f"level_three ({inner}/known_stack.py:9)" in out, out
    assert "main_wait (" in out, out
    # Threads are named by their host tids, the ones /proc shows outside the namespace.
    assert f"Thread {pid} " in out, out


def test_dump_reads_an_interpreter_file_that_exists_only_inside(tmp_path):
    # A static interpreter (`_PyRuntime` in the executable) at a path only the mount namespace has:
    # its symbols are read through /proc/PID/root.
    if not DEBIAN_PYTHON.exists():
        pytest.skip(f"needs a static interpreter: {DEBIAN_PYTHON} not installed")
    inner = tmp_path / "inside"
    with namespaced_target(str(DEBIAN_PYTHON), "known_stack.py", inner, copy_python=True) as (_, pid):
        assert not (inner / "python").exists()
        code, out, err = run_gilty("dump", "--pid", pid)
    assert code == 0, err
    assert f"({inner}/python)" in out.splitlines()[0], out
    assert f"level_three ({inner}/known_stack.py:9)" in out, out


def test_native_stacks_through_an_interpreter_file_that_exists_only_inside(tmp_path):
    # The unwinder read the file at the target's path in our mount namespace (both roots read "/"),
    # where it does not exist: every stack was "cut short at [unknown]".
    if not DEBIAN_PYTHON.exists():
        pytest.skip(f"needs a static interpreter: {DEBIAN_PYTHON} not installed")
    inner = tmp_path / "inside"
    with namespaced_target(str(DEBIAN_PYTHON), "spinners.py", inner, copy_python=True) as (_, pid):
        code, out, err = run_gilty("record", "--native", "--pid", pid, "--duration", "1", "--format", "json")
    assert code == 0, err
    errors = parse_json(out)["errors"]
    assert errors["native_matched"] > 0, errors
    assert errors["native_partial"] <= errors["native_matched"] // 10, errors


def _cpu_quota_group(share: float):
    from test_cpu_starved import _quota_group

    return _quota_group(share)


def test_record_s_of_a_namespace_under_a_cpu_quota(interp, tmp_path):
    one_version(interp, "namespaces and cgroups are kernel behaviour; thread mapping is version-independent")
    inner = tmp_path / "inside"
    with namespaced_target(interp.path, "spinners.py", inner) as (outer, pid), _cpu_quota_group(0.2) as group:
        (group / "cgroup.procs").write_text(str(pid))
        time.sleep(0.2)  # into the first throttled periods
        code, out, err = run_gilty("record", "-s", "--pid", outer, "--duration", "2", "--rate", "100", "--format", "json")
    assert code == 0, err
    report = parse_json(out)
    (proc,) = [p for p in report["processes"] if p["target"]["pid"] == pid]
    spinners = [t for t in proc["threads"] if t["name"].startswith("spinner-")]
    assert len(spinners) == 2, [t["name"] for t in proc["threads"]]
    for t in spinners:
        assert t["top_functions"][0]["function"] == "spin_forever", t["top_functions"][:3]
    assert "cgroup throttled" in proc["saturation"]["line"], proc["saturation"]
