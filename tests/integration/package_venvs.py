"""Venvs of a target interpreter with packages from PyPI (gunicorn, uvicorn, FastAPI), made by the
tests themselves and cached under /tmp between runs; a venv that cannot be made skips with the reason."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
from pathlib import Path

import pytest


@contextlib.contextmanager
def _venv_lock(venv: Path):
    """Held while a venv is checked or made: parallel test workers share the cached venvs."""
    with open(f"{venv}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def new_venv(interpreter: str, venv: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """An empty venv of ``interpreter``. Without pip: ensurepip costs ~5-10 s per venv, and the test
    run's own pip installs into it (see pip_install)."""
    return subprocess.run(
        [interpreter, "-m", "venv", "--clear", "--without-pip", str(venv)], capture_output=True, text=True, timeout=timeout
    )


def pip_install(venv: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`pip install ARGS` into ``venv`` by the test run's pip (`--python`: pip runs under the venv's
    interpreter, so tags and markers are that interpreter's)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--disable-pip-version-check",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def venv_python(interp, name: str, packages: tuple, probe: str, timeout: float = 600) -> str:
    """The python of /tmp/gilty-NAME-VERSION with ``packages`` installed; ``probe`` is Python code
    that exits 0 when the venv is complete (checked first, so a cached venv costs one start)."""
    venv = Path(f"/tmp/gilty-{name}-{interp.version_str}")
    python = venv / "bin" / "python"
    with _venv_lock(venv):
        if python.exists() and subprocess.run([str(python), "-c", probe], capture_output=True, timeout=60).returncode == 0:
            return str(python)
        for step in (lambda: new_venv(interp.path, venv), lambda: pip_install(venv, *packages, timeout=timeout)):
            done = step()
            if done.returncode != 0:
                pytest.skip(f"cannot install {' '.join(packages)} for {interp.id}: {done.stderr.strip()[-300:]}")
    return str(python)
