"""The wheel users install, built once per test session as `pip install .` builds it, and fresh venvs
of each interpreter with it.

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
from package_venvs import new_venv, pip_install

_VENVS: dict = {}

# The oldest glibc the wheel supports (RHEL 7+, Debian 9+, Amazon Linux 2): what `make wheel` targets.
MANYLINUX = "manylinux_2_17"


@functools.lru_cache(maxsize=1)
def zig_available() -> bool:
    """ziglang (requirements-dev.txt) is what lets maturin link against an older glibc than the host's."""
    done = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True, text=True)
    return done.returncode == 0


@functools.lru_cache(maxsize=1)
def _build_wheel() -> tuple:
    """Builds the wheel the way `pip install .` does (PEP 517, through pyproject.toml's backend) from a
    copy of the checkout's files; returns (wheel, files the build left in the copy)."""
    bin_dir = os.path.dirname(sys.executable)
    if shutil.which("maturin", path=bin_dir) is None:
        pytest.skip("maturin is not installed (make setup installs it)")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    source = Path(tempfile.mkdtemp(prefix="gilty-source-"))
    for name in filter(None, (t.decode() for t in tracked)):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    before = {p for p in source.rglob("*")}
    out = Path(tempfile.mkdtemp(prefix="gilty-wheel-"))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        # The backend's own default is the `dist` profile in a scratch target dir: a full LTO build of
        # every crate (~70 s). The tests ask it for the `release` profile, stripped, in the checkout's
        # target/ that `make setup` already filled, so only the last crate is built again; the default
        # itself is covered by tests/unit/test_build_backend.py.
        "CARGO_TARGET_DIR": str(REPO / "target"),
        "MATURIN_PEP517_ARGS": "--profile release --strip",
    }
    if zig_available():
        # Linked by zig against glibc 2.17, as `make wheel` links the published wheel. Its own target
        # directory: zig's linker would make cargo rebuild `make setup`'s crates each time.
        env["CARGO_TARGET_DIR"] = str(REPO / "target" / "wheel-zig")
        env["MATURIN_PEP517_ARGS"] += f" --zig --compatibility {MANYLINUX}"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, f"pip wheel failed:\n{done.stderr[-3000:]}"
    left = sorted(str(p.relative_to(source)) for p in set(source.rglob("*")) - before)
    shutil.rmtree(source, ignore_errors=True)
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
    venv = Path(tempfile.mkdtemp(prefix=f"gilty-venv-{interp.id}-"))
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
