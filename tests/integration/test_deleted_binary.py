"""A target whose interpreter was deleted while it runs, as after a deploy that removes a
`python -m venv --copies` environment: issue 31, item 17. /proc/PID/exe and the maps then name
`PATH (deleted)`; every file read goes through the mapping itself (/proc/PID/map_files).

- the stack readers (dump, record -s) on pyenv 3.12: its interpreter is in libpython, the copied
  executable only starts it;
- native stacks and exact mode on Debian's python3.11, whose executable holds the interpreter and is
  not position-independent (mapped at 0x400000): /proc/PID/maps pads such addresses to 8 digits
  (`00400000-0041f000`) while map_files names them without (`400000-41f000`). Native unwinding left
  deleted files out (every stack "cut short at [unknown]") and exact mode said "cannot open
  ... (deleted) as mapped by process N".
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import DEBIAN_PYTHON, TargetProcess, one_version, parse_json, run_gilty, start_target


def _removed_venv_target(python: str, tmp_path: Path, script: str) -> TargetProcess:
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", "--copies", "--without-pip", str(venv)], check=True, capture_output=True)
    proc = start_target(str(venv / "bin" / "python"), script)
    shutil.rmtree(venv)
    assert os.readlink(f"/proc/{proc.pid}/exe").endswith(" (deleted)")
    return proc


def test_stacks_of_a_removed_venv_interpreter(interp, tmp_path):
    one_version(interp, "a deleted file is kernel behaviour; the copied executable of a shared build holds no reader state")
    proc = _removed_venv_target(interp.path, tmp_path, "known_stack.py")
    try:
        code, out, err = run_gilty("dump", "--pid", proc.pid)
        assert code == 0, err
        assert "level_three (" in out and "known_stack.py:9)" in out, out
        code, out, err = run_gilty("record", "-s", "--pid", proc.pid, "--duration", "1", "--format", "json")
        assert code == 0, err
        (p,) = parse_json(out)["processes"]
        assert p["target"]["executable"].endswith(" (deleted)"), p["target"]
        names = {f["function"] for t in p["threads"] for f in t["top_functions"]}
        assert "level_three" in names, names
    finally:
        proc.stop()


def _debian_target(tmp_path: Path, script: str) -> TargetProcess:
    if not DEBIAN_PYTHON.exists():
        pytest.skip(f"needs a non-PIE interpreter executable: {DEBIAN_PYTHON} not installed")
    return _removed_venv_target(str(DEBIAN_PYTHON), tmp_path, script)


def test_native_stacks_through_a_deleted_interpreter(tmp_path):
    proc = _debian_target(tmp_path, "spinners.py")
    try:
        code, out, err = run_gilty("record", "--native", "--pid", proc.pid, "--duration", "1", "--format", "json")
    finally:
        proc.stop()
    assert code == 0, err
    report = parse_json(out)
    errors = report["errors"]
    assert errors["native_matched"] > 0, errors
    # Unwound through the interpreter's own code, not stopped at its first frame ("cut short at
    # [unknown]": 152 of 152 before).
    assert errors["native_partial"] <= errors["native_matched"] // 10, errors


@pytest.mark.perf
def test_exact_mode_reads_a_deleted_interpreter(tmp_path):
    if os.geteuid() != 0 or not Path("/sys/bus/event_source/devices/uprobe/type").exists():
        pytest.skip("exact mode needs root and the kernel's uprobe PMU")
    proc = _debian_target(tmp_path, "sleeper.py")
    try:
        code, out, err = run_gilty("record", "--exact", "--pid", proc.pid, "--duration", "1", "--format", "json")
    finally:
        proc.stop()
    assert "cannot open" not in err, err
    # Debian's executable is stripped: refused for the symbol it lacks (test_exact's refusal), unless
    # its debug symbols are installed here.
    assert code == 0 or "needs the symbol take_gil" in err, (code, err)
