"""The wheel users install, built once per test session as `pip install .` builds it, and fresh venvs
of each interpreter with it.

Tests that run gilty *inside* a target interpreter (the in-process monitor, the wheel itself) need
the extension installed for that interpreter; the abi3 wheel is the one build that fits them all.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import REPO
from package_venvs import new_venv, pip_install

_VENVS: dict = {}

sys.path.insert(0, str(REPO / "tools"))
from dev_build import MANYLINUX, build_env, zig_available  # noqa: E402,F401 - re-exported for the tests

# Left alone by the build: the repository's own records, the venv, and cargo's target directory.
_NOT_SOURCE = {".git", ".venv", "target"}


def _session_dir(prefix: str) -> Path:
    """A scratch directory removed when the test session's interpreter exits (each session's venvs
    and wheel are a few hundred MB)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _tree_state() -> dict:
    """Every file of the checkout outside _NOT_SOURCE, with its size and modification time."""
    state = {}
    for root, dirs, files in os.walk(REPO):
        if Path(root) == REPO:
            dirs[:] = [d for d in dirs if d not in _NOT_SOURCE]
        for name in files:
            path = Path(root, name)
            st = path.lstat()
            state[str(path.relative_to(REPO))] = (st.st_size, st.st_mtime_ns)
    return state


@functools.lru_cache(maxsize=1)
def _build_wheel() -> tuple:
    """Builds the wheel the way `pip install .` does (PEP 517, through pyproject.toml's backend) from
    the checkout, with `make setup`'s cargo settings (tools/dev_build.py): after `make setup` every
    crate is compiled already and this only packages them. Returns (wheel, files the build created or
    changed in the checkout)."""
    if shutil.which("maturin", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("maturin is not installed (make setup installs it)")
    before = _tree_state()
    out = _session_dir("gilty-wheel-")
    env = build_env(sys.executable)
    # maturin's own output directory, private: by default it is the target directory's wheels/, where
    # an editable build (tools/dev_build.py) running meanwhile writes a wheel of the same name, and pip
    # then copied a mix of the two (central directory 'gilty/__init__.py', local header 'gilty.pth').
    env["MATURIN_PEP517_ARGS"] = f"{env['MATURIN_PEP517_ARGS']} --out {out / 'maturin'}"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, f"pip wheel failed:\n{done.stderr[-3000:]}"
    after = _tree_state()
    left = sorted(name for name, state in after.items() if before.get(name) != state)
    wheels = list(out.glob("gilty-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], left


def build_products_left() -> list:
    """What building the wheel left in the source tree (nothing, when all is well)."""
    return _build_wheel()[1]


def built_wheel() -> Path:
    return _build_wheel()[0]


def venv_with_wheel(interp, *extra_packages: str) -> Path:
    """A fresh venv of ``interp`` with the wheel (and ``extra_packages`` from PyPI) installed; cached."""
    key = (interp.id, extra_packages)
    if key in _VENVS:
        return _VENVS[key]
    venv = _session_dir(f"gilty-venv-{interp.id}-")
    made = new_venv(interp.path, venv)
    assert made.returncode == 0, made.stderr
    done = pip_install(venv, str(built_wheel()), timeout=300)
    assert done.returncode == 0, done.stderr
    if extra_packages:
        done = pip_install(venv, *extra_packages)
        if done.returncode != 0:
            pytest.skip(f"cannot install {' '.join(extra_packages)} for {interp.id}: {done.stderr.strip()[-300:]}")
    _VENVS[key] = venv
    return venv


@pytest.fixture(scope="session")
def wheel() -> Path:
    return built_wheel()
