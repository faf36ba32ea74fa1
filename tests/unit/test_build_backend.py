"""The PEP 517 backend `pip install .` goes through: the `dist` profile unless the caller chose, and a
scratch cargo target directory (removed afterwards) unless the caller set one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "build_backend"))
backend = pytest.importorskip("gilty_build_backend", reason="maturin is not installed (make setup installs it)")


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("MATURIN_PEP517_ARGS", raising=False)
    monkeypatch.delenv("CARGO_TARGET_DIR", raising=False)


def test_dist_profile_by_default(clean_env):
    backend._release_profile(None)
    assert os.environ["MATURIN_PEP517_ARGS"] == "--profile dist"


@pytest.mark.parametrize(
    "settings, env",
    [({"build-args": "--profile release"}, None), ({"maturin.build-args": "-v"}, None), (None, "--profile release")],
)
def test_caller_arguments_win(clean_env, monkeypatch, settings, env):
    if env is not None:
        monkeypatch.setenv("MATURIN_PEP517_ARGS", env)
    backend._release_profile(settings)
    assert os.environ.get("MATURIN_PEP517_ARGS") == env


def test_builds_in_a_scratch_target_dir_that_is_removed(clean_env):
    with backend._outside_the_tree():
        scratch = Path(os.environ["CARGO_TARGET_DIR"])
        assert scratch.is_dir() and REPO not in scratch.parents
    assert "CARGO_TARGET_DIR" not in os.environ and not scratch.exists()


def test_a_callers_target_dir_is_kept(clean_env, monkeypatch, tmp_path):
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path))
    with backend._outside_the_tree():
        assert os.environ["CARGO_TARGET_DIR"] == str(tmp_path)
    assert os.environ["CARGO_TARGET_DIR"] == str(tmp_path) and tmp_path.exists()
