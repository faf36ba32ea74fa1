"""Thread states of threads that run only Python code, sampled the way `gilty record` samples them.

Two threads in a pure-Python loop (austin's two-thread CPU target kind) take turns with the GIL. They
never run C code without the GIL, so whenever one is not holding the GIL it is in the eval breaker's
handoff: waiting_gil, never native. 3.10 runs its eval breaker after every call and on entering a frame,
not only on backward jumps, so there the sampler tells the handoff from C code by the thread's
recursion counter (before: 13-15 % native on 3.10; after: 0).

3.11+ checks the eval breaker after calls too, and its specialised calls of FASTCALL C functions skip
the recursion counter, so a thread forced off the GIL right after a C call and not yet back on a CPU
still reads as native there (measured 1-2.5 % on this target, 4-8 % on a loop calling `list.pop`):
shown as an expected failure up to KNOWN_311, a failure beyond it.
"""

from __future__ import annotations

import collections

import pytest
from conftest import note, running_target
from gilty.sampling.thread_states import STATE_NAMES

pytestmark = [pytest.mark.interpreter, pytest.mark.alone]

SECONDS = 2.0
RATE = 1000.0
# The issue's goal for pure-Python threads' native share.
MAX_NATIVE = 0.02
# 3.11+: the known limitation above, several times over what was measured.
KNOWN_311 = 0.10


def sampled_states(pid: int) -> dict:
    """{thread name: Counter of state names} over SECONDS at RATE."""
    from gilty import _native

    sampler = _native.Sampler(_native.Target(pid), RATE)
    counts: dict = collections.defaultdict(collections.Counter)
    names: dict = {}
    collected = 0.0
    while collected < SECONDS:
        batch = sampler.collect(0.25)
        collected += 0.25
        names.update(batch["threads"])
        for tid, state, _stack, n in batch["counts"]:
            counts[tid][STATE_NAMES[state]] += n
    return {names.get(tid, str(tid)): c for tid, c in counts.items()}


@pytest.fixture(scope="module")
def pair_states(interp):
    with running_target(interp, "python_pair.py") as proc:
        yield sampled_states(proc.pid)


# Guards: a thread forced off the GIL after a call or on entering a frame (3.10's eval breaker) taken
# for one running native code without the GIL.
@pytest.mark.parametrize("name", ["first", "second"])
def test_pure_python_threads_are_never_native(interp, pair_states, name):
    states = pair_states[name]
    total = sum(states.values())
    assert total >= SECONDS * RATE * 0.5, f"{name}: only {total} samples ({dict(states)})"
    native = states["native"] / total
    note(interp, f"python_pair {name}: native share", round(native, 4))
    detail = f"{name}: native {native:.3f} of {total} samples ({dict(states)})"
    if native > MAX_NATIVE and interp.version[:2] >= (3, 11) and native <= KNOWN_311:
        pytest.xfail(f"known on 3.11+: forced off the GIL after a FASTCALL C call, not yet rescheduled ({detail})")
    assert native <= MAX_NATIVE, detail
    # The rest is the states such a thread can be in: with the GIL, waiting for it, or (on a busy
    # machine) runnable without a CPU.
    in_gil_states = (states["holding_gil"] + states["gc"] + states["waiting_gil"] + states["cpu_wait"]) / total
    assert in_gil_states >= 1 - MAX_NATIVE, f"{name}: {dict(states)}"
