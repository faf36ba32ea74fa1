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
from conftest import REPO, record_json, running_target, thread_named
from package_venvs import venv_python

pytestmark = pytest.mark.alone


def _numpy_pin() -> str:
    text = (REPO / "requirements-dev.txt").read_text()
    match = re.search(r"^numpy==[\w.]+", text, re.M)
    assert match, "requirements-dev.txt pins no numpy"
    return match.group(0)


def test_fft_thread_is_native_not_waiting_for_the_gil(interp):
    if interp.path is None:
        pytest.skip(interp.skip_reason or f"{interp.id} is not installed")
    python = venv_python(interp, "numpy", (_numpy_pin(),), "import numpy")
    with running_target(python, "starved.py", "-", "fft") as target:
        # Steady (an FFT of 2**18 points every few ms, for ever): 200 passes, 80 at the 40 % a busy
        # machine leaves, read a share to within a few points; the bug read waiting_gil 0.999.
        report = record_json(target.pid, duration=1.0, rate=200.0)
    fft = thread_named(report, "fft")
    states = fft["states"]
    # Nobody else wants the GIL (the main thread sleeps): there is nothing to wait for.
    assert states["waiting_gil"] <= 0.05, states
    assert states["native"] + states["cpu_wait"] >= 0.5, states
