"""Share of each thread's samples in each state, and process-wide GIL figures."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gilty.sampling.session import CPU_WAIT, GC, HOLDING_GIL, STATE_NAMES, UNKNOWN, WAITING_GIL, Session


@dataclass
class ThreadStates:
    """Sample counts of one thread per state code (index = state code)."""

    tid: int
    samples: int
    counts: list
    held_cpu_wait: int = 0  # of counts[CPU_WAIT], samples holding the GIL (preempted holder)

    def fraction(self, state: int) -> float:
        return self.counts[state] / self.samples if self.samples else 0.0

    def table_counts(self) -> list:
        """``counts`` as the text tables show them: a holder preempted by the kernel (cpu_wait holding
        the GIL) counted under holding_gil, so HOLD means one thing in every table, the process's GIL
        share and exact mode's hold alike; cpu_wait keeps only the waits for a CPU without the GIL."""
        counts = list(self.counts)
        moved = min(self.held_cpu_wait, counts[CPU_WAIT])
        counts[CPU_WAIT] -= moved
        counts[HOLDING_GIL] += moved
        return counts

    def table_fractions(self) -> list:
        return [c / self.samples if self.samples else 0.0 for c in self.table_counts()]

    @property
    def hold_fraction(self) -> float:
        """Share of samples holding the GIL: running, collecting, or preempted while holding it."""
        return (self.holding + self.held_cpu_wait) / self.samples if self.samples else 0.0

    def fractions(self) -> dict:
        """{state name: fraction of this thread's samples}; sums to 1 when samples > 0."""
        return {name: self.fraction(code) for code, name in enumerate(STATE_NAMES)}

    @property
    def holding(self) -> int:
        """Samples holding the GIL, collecting garbage included (the collector holds it)."""
        return self.counts[HOLDING_GIL] + self.counts[GC]


def _state_code(state: int) -> int:
    # A code this version does not know is shown as unknown rather than dropped.
    return state if 0 <= state < len(STATE_NAMES) else UNKNOWN


def thread_states(session: Session) -> dict:
    """{tid: ThreadStates} for every thread with at least one sample."""
    per_thread: dict = {}
    for (tid, state, _stack_id), n in session.counts.items():
        counts = per_thread.setdefault(tid, [0] * len(STATE_NAMES))
        counts[_state_code(state)] += n
    held = session.held_cpu_wait
    return {tid: ThreadStates(tid, sum(counts), counts, held.get(tid, 0)) for tid, counts in per_thread.items()}


def idle_syscalls(session: Session, states: dict) -> dict:
    """{tid: {syscall name: fraction of the thread's samples idle in it}}.

    Fractions are of all the thread's samples, so they add up to its idle share.
    """
    counts: Counter = Counter()
    # Folded off every run as recorded (sampling/run_folds.py), by thread and in the order each
    # syscall was first seen, so equal counts keep that order.
    for tid, by_syscall in sorted(session.folds.results()["idle_syscalls"].items()):
        for nr, passes in by_syscall.items():
            counts[(tid, nr)] += passes
    result: dict = {}
    for (tid, nr), n in counts.most_common():
        names = result.setdefault(tid, {})
        label = session.syscall_label(nr)
        names[label] = names.get(label, 0.0) + n / states[tid].samples
    return result


def gil_utilisation(session: Session) -> float:
    """Fraction of sampling passes in which some thread held the GIL (running or in GC)."""
    if not session.samples:
        return 0.0
    return session.passes_with_gil_held() / session.samples


def gc_share(session: Session) -> float:
    """Fraction of sampling passes in which the GIL holder was collecting garbage."""
    if not session.samples:
        return 0.0
    return session.passes_in_gc() / session.samples


def mean_waiting_threads(session: Session) -> float:
    """Mean number of threads waiting for the GIL per sampling pass."""
    if not session.samples:
        return 0.0
    waiting = sum(n for (_tid, state, _stack_id), n in session.counts.items() if state == WAITING_GIL)
    return waiting / session.samples
