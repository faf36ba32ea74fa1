"""The NumPy venv of every interpreter, made from PyPI in the parallel part of the run: the tests
marked `alone` that use it (test_numpy_states.py) then find it ready instead of spending half a
minute per interpreter installing it with nothing beside them."""

from __future__ import annotations

import subprocess

import pytest
from package_venvs import venv_python
from test_numpy_states import _numpy_pin


def test_numpy_venv_has_the_pinned_numpy(interp):
    if interp.path is None:
        pytest.skip(interp.skip_reason or f"{interp.id} is not installed")
    pin = _numpy_pin(interp)
    python = venv_python(interp, "numpy", (pin,), "import numpy")
    got = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == pin.split("==")[1], (got.stdout, pin)
