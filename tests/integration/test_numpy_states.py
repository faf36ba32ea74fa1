"""A thread in NumPy C code that released the GIL (an FFT) is `native`, not waiting for the GIL.

On 3.10 gilty tells a thread in the eval breaker's GIL handoff from one in C code by the recursion
counter, which a NumPy ufunc (called through its type's own vectorcall) does not move: the FFT thread
read waiting_gil 99.9 % (exact tracing: 0.002 %). NumPy comes from PyPI, pinned in
requirements-dev.txt, into a venv per interpreter (package_venvs.py); where it cannot be installed the
test skips saying why.
"""

from __future__ import annotations

import re

import pytest
from conftest import REPO, record_json, running_target
from package_venvs import venv_python

pytestmark = pytest.mark.alone


def _numpy_pin(interp) -> str:
    """The NumPy requirement-dev.txt pins for ``interp``'s version (the line whose marker holds)."""
    text = (REPO / "requirements-dev.txt").read_text()
    version = tuple(int(x) for x in interp.version_str.split(".")[:2])
    for pin, op, major, minor in re.findall(r'^(numpy==[\w.]+)\s*;\s*python_version\s*(<|>=)\s*"(\d+)\.(\d+)"', text, re.M):
        bound = (int(major), int(minor))
        if (version < bound) == (op == "<"):
            return pin
    raise AssertionError(f"requirements-dev.txt pins no numpy for Python {interp.version_str}")


def test_fft_thread_is_native_not_waiting_for_the_gil(interp):
    if interp.path is None:
        pytest.skip(interp.skip_reason or f"{interp.id} is not installed")
    python = venv_python(interp, "numpy", (_numpy_pin(interp),), "import numpy")
    with running_target(python, "starved.py", "-", "fft") as target:
        # Steady (an FFT of 2**18 points every few ms, for ever): 200 passes, 80 at the 40 % a busy
        # machine leaves, read a share to within a few points; the bug read waiting_gil 0.999.
        report = record_json(target.pid, duration=1.0, rate=200.0)
    # From 3.14 CPython gives a thread's name to the OS thread, and NumPy's own worker threads started
    # by it inherit that name: the Python thread is the one with Python frames.
    named = [t for t in report["threads"] if t["name"] == "fft"]
    python_threads = [t for t in named if any(f["function"] is not None for f in t["top_functions"])]
    assert len(python_threads) == 1, named
    fft = python_threads[0]
    states = fft["states"]
    # Nobody else wants the GIL (the main thread sleeps): there is nothing to wait for.
    assert states["waiting_gil"] <= 0.05, states
    assert states["native"] + states["cpu_wait"] >= 0.5, states
