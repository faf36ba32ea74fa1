"""Keeping a long recording's timeline (pass times, pass flags, runs) within a fixed budget.

A thread's runs grow with its state changes: a thread that naps 1-5 ms changes state every few
passes, so at 1000 Hz thirty such threads add ~20,000 runs a second. Once the timeline holds more
than ``budget`` passes or runs, it is *coarsened*: every other kept pass is dropped, as if the
recording had been sampled at half the rate from its start (pass ``p`` is kept while
``p % step == 0``, and becomes tick ``p // step``); runs are cut to the ticks they cover and
neighbours left in one state merge. Each halving at least halves the ticks, and a thread has at
most one run a tick, so what is kept stays O(budget) whatever the duration.

Only the timeline is coarsened: sample counts, blame, pass-flag counts and what the analyses
read off every run (``run_folds.py``) are taken from the sampler's batches at full resolution,
so summary figures stay exact; the timeline's outputs say at what resolution they are.
"""

from __future__ import annotations

import os
from array import array

# Passes, and runs over all threads, a timeline keeps before it is coarsened: at most ~9 bytes a
# pass and 11 a run (plus the arrays' spare room), a few MiB. GILTY_TIMELINE_BUDGET (not
# documented as an option: for tests and benchmarks) sets another.
DEFAULT_BUDGET = 1 << 18
BUDGET_ENV = "GILTY_TIMELINE_BUDGET"
# Never coarsened below this many ticks (a recording of very many threads keeps its ticks, and
# its runs stay under threads x MIN_TICKS).
MIN_TICKS = 64


def budget_from_env() -> int:
    value = os.environ.get(BUDGET_ENV, "")
    try:
        budget = int(value)
    except ValueError:
        return DEFAULT_BUDGET
    return budget if budget >= MIN_TICKS else DEFAULT_BUDGET


def ticks_before(p: int, step: int) -> int:
    """Kept passes before pass ``p``: the tick of ``p`` if it is kept, else of the next kept one."""
    return -(-p // step)


def decimate(cols, start: int, step: int) -> tuple:
    """Runs (columns passes, state, stack, syscall) tiling passes from ``start``, cut to the passes
    kept at ``step``: (first tick, columns in ticks). A run covering no kept pass goes; runs left
    side by side in one state and syscall merge (the stack of the first kept)."""
    passes, state, stack, syscall = cols
    out_passes, out_state, out_stack, out_syscall = (array(c.typecode) for c in cols)
    p = start
    for i in range(len(passes)):
        end = p + passes[i]
        n = ticks_before(end, step) - ticks_before(p, step)
        p = end
        if not n:
            continue
        if len(out_state) and out_state[-1] == state[i] and out_syscall[-1] == syscall[i]:
            out_passes[-1] += n
        else:
            out_passes.append(n)
            out_state.append(state[i])
            out_stack.append(stack[i])
            out_syscall.append(syscall[i])
    return ticks_before(start, step), (out_passes, out_state, out_stack, out_syscall)


def resolution_note(step: int, rate_hz: float) -> str:
    return f"timeline resolution {1000.0 * step / rate_hz:g} ms after coarsening (every {step}th pass kept)"
