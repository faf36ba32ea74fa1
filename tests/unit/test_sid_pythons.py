"""tools/sid_pythons.py: Debian sid's python3.14/3.15 in a private root, and how the suite finds them.

The interpreters must run as they are (no PYTHONHOME: a target started by a user has none) and be
themselves in /proc/PID/exe, which is what gilty reads; a second run must not reach the network; where
they cannot be had the script says why in one line, exits 0 (so `make test` goes on) and the suite
shows that reason on a skipped id.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / "tools" / "sid_pythons.py"
STAMP = Path(os.environ.get("GILTY_SID_CACHE") or "/root/.cache/gilty/sid-pythons") / "stamp.json"


def built() -> dict:
    try:
        return json.loads(STAMP.read_text())["interpreters"]
    except (OSError, ValueError, KeyError):
        pytest.skip(f"sid's interpreters not built ({STAMP} absent: make sid-pythons, as root)")


@pytest.mark.parametrize("minor", ["3.14", "3.15"])
def test_sid_interpreter_runs_without_env_and_is_its_own_exe(minor):
    info = built().get(minor)
    if info is None:
        pytest.skip(f"sid's python{minor} not built")
    code = "import asyncio, ssl, sqlite3, ctypes, hashlib, threading, sys; print(sys.prefix, flush=True); sys.stdin.read()"
    proc = subprocess.Popen(
        [info["exe"], "-c", code], env={}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline().strip()
        assert line == info["prefix"], proc.stderr.read() if not line else line
        assert os.readlink(f"/proc/{proc.pid}/exe") == info["exe"]
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert f"{info['prefix']}/lib/x86_64-linux-gnu/libc.so.6" in maps  # sid's glibc, not the system's
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


@pytest.mark.parametrize("minor", ["3.14", "3.15"])
def test_debug_file_describes_the_patched_interpreter(minor):
    # patchelf must leave the code where the debug info says it is, or uprobes land elsewhere.
    info = built().get(minor)
    if info is None or not info.get("debug_file"):
        pytest.skip(f"no debug file for sid's python{minor}")

    def symbols(*args):
        out = subprocess.run(["nm", *args], capture_output=True, text=True, check=True).stdout
        return {line.split()[2]: line.split()[0] for line in out.splitlines() if len(line.split()) == 3}

    exported = symbols("-D", "--defined-only", info["exe"])
    full = symbols(info["debug_file"])
    assert exported["_PyRuntime"] == full["_PyRuntime"]
    assert "take_gil.lto_priv.0" in full or "take_gil" in full


def test_second_run_reads_only_the_stamp():
    built()
    # No network namespace: a run that reached for sid's package lists would fail or say "skipped".
    t0 = time.monotonic()
    r = subprocess.run(["unshare", "-n", sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=30)
    elapsed = time.monotonic() - t0
    if r.returncode != 0 and "unshare" in r.stderr:
        pytest.skip(f"no network namespace here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(line.endswith("(cached)") for line in lines), r.stdout
    assert elapsed < 20, elapsed


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the script as another user: needs root")
def test_not_root_is_one_line_and_exit_zero(tmp_path):
    env = dict(os.environ, GILTY_SID_CACHE=str(tmp_path / "cache"))
    r = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.count("\n") == 1 and "not root" in r.stdout, r.stdout


def test_the_scripts_reason_names_the_skipped_interpreter(tmp_path):
    (tmp_path / "skip-reason.txt").write_text("apt-get update against sid failed: E: no route\n")
    code = (
        "import conftest; print([i.skip_reason for i in conftest.INTERPRETERS "
        "if i.id == '3.15-missing'] or [i.id for i in conftest.INTERPRETERS])"
    )
    env = dict(os.environ, GILTY_SID_CACHE=str(tmp_path), PYTHONPATH=str(REPO / "tests"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    if "3.15." in r.stdout and "missing" not in r.stdout:
        pytest.skip(f"a pyenv 3.15 is installed: {r.stdout.strip()}")
    assert "E: no route" in r.stdout, r.stdout
