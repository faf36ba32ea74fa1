"""Pure-Python twin of the native per-pass aggregation (``crates/gilty-core/src/sampling/aggregate.rs``).

Recordings are aggregated natively; this twin turns per-(pass, thread) rows into the same batch
fields (runs, counts, blame, pass flags, samples handling an exception) so that tests and small tools can build sessions without
a live target, and so that the two can be checked against each other. Keep both in step.
"""

from __future__ import annotations

from array import array
from typing import Iterable

GC = 1
HOLDING_GIL = 0
WAITING_GIL = 2
NONE = -1  # no stack, no syscall, no holder
ABSENT = 255  # run state of passes in which a thread was not seen, between two runs of it

PASS_GIL_HELD = 1  # some thread held the GIL (running Python or collecting garbage)
PASS_IN_GC = 2  # some thread was collecting garbage
PASS_HOLDER_CPU_WAIT = 4  # the GIL's holder was waiting for a CPU (PASS_GIL_HELD is set too)
CPU_WAIT = 6

# Array typecodes of the run columns, in the order the native batch sends them. A thread's runs
# tile its passes, so no first-pass column is needed: the batch's thread_slices give the first.
RUN_COLUMNS = (("passes", "I"), ("state", "B"), ("stack", "i"), ("syscall", "h"))


def aggregate_rows(n_passes: int, rows: Iterable[tuple]) -> dict:
    """Batch fields for ``n_passes`` passes from rows (pass, tid, state, stack_id, syscall[, holds[, handling]]).

    Rows are taken in pass order and, within a pass, in the order the threads were read (which
    decides the holder blamed when a torn read shows two). ``holds`` (default: the state is
    holding_gil or gc) marks the GIL's holder, which may also be in ``cpu_wait``; ``handling``
    (default False) a thread handling an exception.
    """
    by_pass: list = [[] for _ in range(n_passes)]
    holders: list = [[] for _ in range(n_passes)]
    handling: dict = {}  # (tid, state, stack_id) -> samples handling an exception
    for row in rows:
        by_pass[row[0]].append(row[1:5])
        if len(row) > 6 and row[6]:
            key = (row[1], row[2], row[3])
            handling[key] = handling.get(key, 0) + 1
        holds = row[5] if len(row) > 5 else row[2] in (HOLDING_GIL, GC)
        if holds:
            holders[row[0]].append((row[1], row[3], row[2]))
    open_runs: dict = {}  # tid -> [first_pass, passes, state, stack, syscall]
    closed: list = []
    counts: dict = {}
    blame: dict = {}
    held_cpu_wait: dict = {}  # tid -> passes it held the GIL in cpu_wait
    flags = bytearray(n_passes)
    for p, threads in enumerate(by_pass):
        holder = holders[p][0][:2] if holders[p] else (NONE, NONE)
        if holder[0] != NONE:
            flags[p] |= PASS_GIL_HELD
            if holders[p][0][2] == CPU_WAIT:
                flags[p] |= PASS_HOLDER_CPU_WAIT
                held_cpu_wait[holder[0]] = held_cpu_wait.get(holder[0], 0) + 1
        if any(state == GC for _tid, state, _stack, _nr in threads):
            flags[p] |= PASS_IN_GC
        for tid, state, stack, nr in threads:
            counts[(tid, state, stack)] = counts.get((tid, state, stack), 0) + 1
            if state == WAITING_GIL:
                key = (tid, *holder)
                blame[key] = blame.get(key, 0) + 1
            run = open_runs.get(tid)
            if run is not None and run[0] + run[1] == p and run[2] == state and run[4] == nr:
                run[1] += 1
                continue
            if run is not None:
                closed.append((tid, *run))
                if run[0] + run[1] < p:
                    closed.append((tid, run[0] + run[1], p - run[0] - run[1], ABSENT, NONE, NONE))
            open_runs[tid] = [p, 1, state, stack, nr]
    closed.extend((tid, *run) for tid, run in open_runs.items())
    closed.sort(key=lambda r: (r[0], r[1]))
    columns = {name: array(code, [r[i] for r in closed]).tobytes() for i, (name, code) in enumerate(RUN_COLUMNS, 2)}
    slices: list = []  # (tid, start, end, first pass) of each thread's runs
    for i, run in enumerate(closed):
        if slices and slices[-1][0] == run[0]:
            slices[-1][2] = i + 1
        else:
            slices.append([run[0], i, i + 1, run[1]])
    return {
        "runs": columns,
        "thread_slices": [tuple(s) for s in slices],
        "counts": [(*key, n) for key, n in counts.items()],
        "blame": [(*key, n) for key, n in blame.items()],
        "pass_flags": bytes(flags),
        "held_cpu_wait": list(held_cpu_wait.items()),
        "handling": [(*key, n) for key, n in handling.items()],
    }
