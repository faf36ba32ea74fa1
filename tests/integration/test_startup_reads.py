"""What a recording says of a process in its first milliseconds and its last: issue 31, item 20.

- pyenv's 3.10 carries no PY_VERSION literal, so its micro version is read from `sys.version`; a
  command attached as soon as it has a thread state (`record -- CMD`) had no `sys` module yet and was
  reported as Python "3.10" (4 recordings in 117).
- A module's first instruction (RESUME) has line 0 in its line table from 3.11 on: a module frame
  that had not run a line yet, at process start or in an import, read `<module> (file:0)`.
- `duration_s` was the wall time of the loop, past the last pass when the host kept gilty off a CPU
  (0.2-0.46 s at load 13-20) and the command exited meanwhile.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import gilty_command, gilty_env, one_version, parse_json, run_gilty, start_target

ATTACHES = 20


def test_310_micro_version_of_a_command_attached_at_its_start(interp):
    if interp.minor_str != "3.10":
        pytest.skip("only 3.10 reads its micro version from sys.version (no PY_VERSION literal in pyenv's build)")
    from gilty import _native
    from gilty.sampling import launch

    seen = []
    for _ in range(ATTACHES):
        child = subprocess.Popen([interp.path, "-c", "import time; time.sleep(5)"], stdin=subprocess.DEVNULL)
        try:
            # The way `record -- CMD` attaches: at the first try that finds a thread state.
            seen.append(launch.attach_to_command(_native, child, [interp.path]).python_version)
        finally:
            child.kill()
            child.wait()
    assert seen == [interp.version_str] * ATTACHES, seen


def test_a_module_that_has_not_run_a_line_is_at_its_first_line(interp):
    one_version(interp, "the line table's RESUME at line 0 is the same on 3.11-3.13")
    proc = start_target(interp.path, "held_module.py")
    try:
        code, out, err = run_gilty("dump", "--pid", proc.pid)
    finally:
        proc.stop()
    assert code == 0, err
    assert "<module> (<held>:1)" in out, out


def _children(pid: int) -> list:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.parametrize("how", [[], ["-s"]], ids=["one process", "-s"])
def test_duration_ends_at_the_last_pass_when_gilty_got_no_cpu(interp, tmp_path, how):
    one_version(interp, "the recording's clock reads nothing version-specific")
    spin = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.0:\n    pass\n"
    out = tmp_path / "r.json"
    argv = [*gilty_command(), "record", *how, "--rate", "100", "--format", "json", "-o", str(out), "--", interp.path, "-c", spin]
    gilty = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=gilty_env())
    try:
        deadline = time.monotonic() + 30
        while not _children(gilty.pid):
            assert gilty.poll() is None and time.monotonic() < deadline, gilty.stderr.read()
            time.sleep(0.005)
        time.sleep(0.5)
        # A host that gives gilty no CPU while the command ends: the extreme of load 20 on 2 CPUs.
        os.kill(gilty.pid, signal.SIGSTOP)
        time.sleep(1.2)
        os.kill(gilty.pid, signal.SIGCONT)
        gilty.wait(timeout=30)
    finally:
        if gilty.poll() is None:
            gilty.kill()
            gilty.wait()
    assert gilty.returncode == 0, gilty.stderr.read()
    report = parse_json(out.read_text())
    assert report["stopped_by"] == "target_exit", report["stopped_by"]
    # The passes ran for about 0.5 s (then gilty was stopped); the wall time was 1.7 s or more.
    assert report["duration_s"] < 1.0, report["duration_s"]
    assert report["samples"] > 20, report["samples"]
    for p in report.get("processes") or []:
        assert p["duration_s"] < 1.0, (p["target"]["pid"], p["duration_s"])
