"""`gilty top` with stdout not a terminal: plain blocks, one per refresh, no screen control codes."""

from __future__ import annotations

import pytest
from conftest import one_version, proc_state, run_gilty, running_target

pytestmark = pytest.mark.interpreter


@pytest.fixture(scope="module")
def cpu_and_io(interp):
    # top's blocks are gilty's own layout over the sampler's reads, which test_record.py checks on
    # every version (thread names, states).
    one_version(interp, "top's plain blocks do not depend on the target's version")
    with running_target(interp, "cpu_and_io_threads.py") as proc:
        yield proc


# Guards: top printing nothing (or only escape codes) when piped, leaving threads out, or hanging
# past --duration; and the watched target being disturbed.
def test_top_prints_blocks_with_thread_names(interp, cpu_and_io):
    rc, out, err = run_gilty("top", "--pid", cpu_and_io.pid, "--duration", 2, timeout=30)
    assert rc == 0, f"exit {rc}; stderr:\n{err}"
    assert "Traceback" not in err, err
    assert "\x1b[" not in out, "screen control codes on a non-terminal stdout"
    for name in ("io1", "io2", "cpu1", "MainThread"):
        assert name in out, f"{name!r} missing from top output:\n{out}"
    # The spinner holds the GIL: its row must carry a state share, i.e. some percentage.
    assert "%" in out, out
    assert cpu_and_io.alive() and proc_state(cpu_and_io.pid)["tracer"] == 0
