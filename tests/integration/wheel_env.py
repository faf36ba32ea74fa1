"""The wheel users install, built once per test session, and fresh venvs of each interpreter with it.

Tests that run gilty *inside* a target interpreter (the in-process monitor, the wheel itself) need
the extension installed for that interpreter; the abi3 wheel is the one build that fits them all.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO

_VENVS: dict = {}


@functools.lru_cache(maxsize=1)
def _build_wheel() -> Path:
    maturin = shutil.which("maturin", path=os.path.dirname(sys.executable)) or shutil.which("maturin")
    if maturin is None:
        pytest.skip("maturin is not installed (make setup installs it)")
    out = Path(tempfile.mkdtemp(prefix="gilty-wheel-"))
    done = subprocess.run(
        [maturin, "build", "--profile", "dist", "-i", sys.executable, "-o", str(out), "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"maturin build failed:\n{done.stderr[-3000:]}"
    wheels = list(out.glob("gilty-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def built_wheel() -> Path:
    return _build_wheel()


def venv_with_wheel(interp, *extra_packages: str) -> Path:
    """A fresh venv of ``interp`` with the wheel (and ``extra_packages`` from PyPI) installed; cached."""
    key = (interp.id, extra_packages)
    if key in _VENVS:
        return _VENVS[key]
    venv = Path(tempfile.mkdtemp(prefix=f"gilty-venv-{interp.id}-"))
    subprocess.run([interp.path, "-m", "venv", str(venv)], check=True, timeout=120, capture_output=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    done = subprocess.run([*pip, str(built_wheel())], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    if extra_packages:
        done = subprocess.run([*pip, *extra_packages], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.skip(f"cannot install {' '.join(extra_packages)} for {interp.id}: {done.stderr.strip()[-300:]}")
    _VENVS[key] = venv
    return venv


@pytest.fixture(scope="session")
def wheel() -> Path:
    return built_wheel()
