"""Venvs of a target interpreter with packages from PyPI (gunicorn, uvicorn, FastAPI), made by the
tests themselves and cached under /tmp between runs; a venv that cannot be made skips with the reason."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

_LOCK = threading.Lock()


def venv_python(interp, name: str, packages: tuple, probe: str, timeout: float = 600) -> str:
    """The python of /tmp/gilty-NAME-VERSION with ``packages`` installed; ``probe`` is Python code
    that exits 0 when the venv is complete (checked first, so a cached venv costs one start)."""
    venv = Path(f"/tmp/gilty-{name}-{interp.version_str}")
    python = venv / "bin" / "python"
    with _LOCK:
        if python.exists() and subprocess.run([str(python), "-c", probe], capture_output=True, timeout=60).returncode == 0:
            return str(python)
        for step in (
            [interp.path, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
        ):
            done = subprocess.run(step, capture_output=True, text=True, timeout=timeout)
            if done.returncode != 0:
                pytest.skip(f"cannot install {' '.join(packages)} for {interp.id}: {done.stderr.strip()[-300:]}")
    return str(python)
