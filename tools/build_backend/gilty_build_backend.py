"""PEP 517 backend for `pip install .`: maturin's, building the `dist` profile in a temporary cargo
target directory.

maturin builds into the source tree's `target/`, so `pip install .` from a checkout would leave a
few hundred MB of build products behind. Contributors build with `make setup` (maturin directly,
incremental, in `target/`), which does not come through here. A CARGO_TARGET_DIR or maturin
arguments (MATURIN_PEP517_ARGS, `--config-settings build-args=…`) set by the caller are respected.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

import maturin
from maturin import (  # noqa: F401 - re-exported hooks that build nothing
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_wheel,
)


@contextlib.contextmanager
def _outside_the_tree():
    if os.environ.get("CARGO_TARGET_DIR"):
        yield
        return
    scratch = tempfile.mkdtemp(prefix="gilty-build-")
    os.environ["CARGO_TARGET_DIR"] = scratch
    try:
        yield
    finally:
        del os.environ["CARGO_TARGET_DIR"]
        shutil.rmtree(scratch, ignore_errors=True)


def _release_profile(config_settings):
    """The wheel users get: the `dist` profile (no debug info, stripped), unless told otherwise."""
    told = config_settings and ("build-args" in config_settings or "maturin.build-args" in config_settings)
    if not told and "MATURIN_PEP517_ARGS" not in os.environ:
        os.environ["MATURIN_PEP517_ARGS"] = "--profile dist"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _release_profile(config_settings)
    with _outside_the_tree():
        return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    with _outside_the_tree():
        return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
