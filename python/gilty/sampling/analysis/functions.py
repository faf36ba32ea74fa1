"""Where threads are: the innermost function of their samples, per state (a C function with
`record --native`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gilty.sampling.native_frames import frame_text
from gilty.sampling.session import GC, HOLDING_GIL, IDLE, NATIVE, STATE_NAMES, WAITING_GIL, Session

# Unknown is left out: its stacks are not trustworthy enough to point at code.
TOP_FUNCTION_STATES = (HOLDING_GIL, GC, WAITING_GIL, NATIVE, IDLE)
TOP_FUNCTIONS_PER_STATE = 5


@dataclass
class FunctionShare:
    """One innermost function's share of a thread's samples in one state.

    ``function`` is None for samples without a Python stack. ``line`` is the line seen most
    often: samples of one function are pooled across its lines so a hot loop is not split.
    """

    function: Optional[str]
    file: Optional[str]
    line: Optional[int]
    state: str
    samples: int
    fraction: float
    # Of ``samples``, those in which the thread was handling an exception (an error path).
    handling_samples: int = 0

    @property
    def handling_share(self) -> float:
        return self.handling_samples / self.samples if self.samples else 0.0

    def label(self) -> str:
        if self.function is None:
            return "(no Python stack)"
        return frame_text(self.function, self.file, self.line)


def most_frequent(counts: dict):
    """The key with the largest count (the first such on ties)."""
    return max(counts, key=counts.__getitem__)


def _pool_by_function(session: Session, counts: dict) -> dict:
    """Fold {(group, stack_id): n} into {group: {(function, file): [n, {line: n}]}}.

    Line counts are plain dicts: one Counter per entry costs more than the rest of the fold.
    """
    pooled: dict = {}
    for (group, stack_id), n in counts.items():
        frame = session.innermost_frame(stack_id)
        function, file, line = frame if frame is not None else (None, None, None)
        entry = pooled.setdefault(group, {}).setdefault((function, file), [0, {}])
        entry[0] += n
        lines = entry[1]
        lines[line] = lines.get(line, 0) + n
    return pooled


def error_path_counts(session: Session) -> dict:
    """{(tid, state, stack_id): samples} handling an exception, waits left out.

    A wait inside `except` is idle, not error handling (3.12's ThreadPoolExecutor waits for work in
    `except queue.Empty:`), and so is its wake-up: the same stack waiting for the GIL or a CPU as
    the call returns.
    """
    waits = {(tid, stack_id) for (tid, state, stack_id) in session.handling if state == IDLE}
    return {key: n for key, n in session.handling.items() if key[1] != IDLE and (key[0], key[2]) not in waits}


def top_functions(session: Session, states: dict, limit: int = TOP_FUNCTIONS_PER_STATE) -> dict:
    """{tid: [FunctionShare]}: up to ``limit`` functions per state, states in code order.

    ``states`` is ``thread_states(session)``; fractions are of the thread's samples.
    """
    wanted = set(TOP_FUNCTION_STATES)
    counts = {((tid, state), stack_id): n for (tid, state, stack_id), n in session.counts.items() if state in wanted}
    handled = {((tid, state), stack_id): n for (tid, state, stack_id), n in error_path_counts(session).items() if state in wanted}
    handled_pooled = _pool_by_function(session, handled) if handled else {}
    result: dict = {}
    for (tid, state), functions in sorted(_pool_by_function(session, counts).items()):
        total = states[tid].samples
        ranked = sorted(functions.items(), key=lambda item: (-item[1][0], str(item[0])))[:limit]
        shares = result.setdefault(tid, [])
        in_error_paths = handled_pooled.get((tid, state), {})
        for (function, file), (n, lines) in ranked:
            line = most_frequent(lines)
            handling = in_error_paths.get((function, file), [0])[0]
            shares.append(FunctionShare(function, file, line, STATE_NAMES[state], n, n / total, handling))
    return result


def top_function_overall(session: Session, states: dict, busy_min: Optional[float] = None) -> dict:
    """{tid: FunctionShare}: the single most frequent innermost function of each thread.

    Samples without a Python stack are skipped unless the thread has nothing else; the
    reported state is the one that function was seen in most. With ``busy_min``, a thread
    that is not idle for at least that share of its samples is named by its busiest
    function, its idle samples left out (the share is then of its not-idle samples' function).
    """
    counts = {((tid, state), stack_id): n for (tid, state, stack_id), n in session.counts.items()}
    by_thread: dict = {}
    for (tid, state), functions in _pool_by_function(session, counts).items():
        for key, (n, lines) in functions.items():
            entry = by_thread.setdefault(tid, {}).setdefault(key, [0, {}, {}])
            entry[0] += n
            for line, k in lines.items():
                entry[1][line] = entry[1].get(line, 0) + k
            entry[2][state] = entry[2].get(state, 0) + n
    result = {}
    for tid, functions in by_thread.items():
        with_stack = {k: v for k, v in functions.items() if k[0] is not None} or functions
        if busy_min is not None:
            # A worker that runs 20 % of the time and sleeps the rest is about what it runs.
            total = states[tid].samples
            busy = {k: v for k, v in with_stack.items() if sum(n for st, n in v[2].items() if st != IDLE) > 0}
            busy_samples = total - states[tid].counts[IDLE] if IDLE < len(states[tid].counts) else total
            if busy and total and busy_samples / total >= busy_min:
                with_stack = {
                    k: [sum(n for st, n in v[2].items() if st != IDLE), v[1], {st: n for st, n in v[2].items() if st != IDLE}]
                    for k, v in busy.items()
                }
        (function, file), (n, lines, by_state) = max(with_stack.items(), key=lambda item: (item[1][0], str(item[0])))
        state = most_frequent(by_state)
        result[tid] = FunctionShare(function, file, most_frequent(lines), STATE_NAMES[state], n, n / states[tid].samples)
    return result
