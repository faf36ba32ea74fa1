"""A target whose interpreter file was deleted or replaced after it started: a package upgrade under a
running service (apt replacing /usr/bin/python3.X), or a test interpreter unpacked again. The kernel
then names the mapping `PATH (deleted)`, and gilty read `_PyRuntime` from a path that no longer held
the file: "pid N (... (deleted)) is not a Python process". It reads the mapped file itself now.

Needs an interpreter that carries `_PyRuntime` in the executable (no libpython): Debian's python3.11.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import DEBIAN_PYTHON, run_gilty, start_target


def test_dump_reads_an_interpreter_deleted_since_it_started(tmp_path):
    if not DEBIAN_PYTHON.exists():
        pytest.skip(f"needs a static interpreter: {DEBIAN_PYTHON} not installed")
    copy = tmp_path / "python3.11"
    shutil.copy2(DEBIAN_PYTHON, copy)
    proc = start_target(str(copy), "known_stack.py")
    try:
        copy.unlink()
        code, out, err = run_gilty("dump", "--pid", proc.pid)
        assert code == 0, err
        assert "level_three (" in out and "known_stack.py:9)" in out, out
    finally:
        proc.stop()
