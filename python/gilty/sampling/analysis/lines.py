"""Time per source line, by state: what the HTML report's source view draws (docs/source-view.md).

A recorded frame is ``(function, file, line)`` with the line the frame stood on, so a sample's
stack already says which line each of its functions was at. Per function (its name and file) and
per line of it, in samples per state:

- ``self``: the sample's innermost Python frame stood on that line (the thread was there);
- ``total``: some frame of the sample's stack stood on that line (the line was running, or calling
  what was). A recursive function's line is counted once per sample, not once per frame.

C frames of ``record --native`` and samples without a Python stack are left out: they have no
Python line. The functions that matter are those with the most self samples in the states shown
(idle left out, as the flame graph does by default), ties broken by total samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from gilty.sampling.native_frames import is_native
from gilty.sampling.session import IDLE, NO_STACK, STATE_NAMES, Session

# Functions the report shows by default, and a bound on what one can ask for (page size).
DEFAULT_FUNCTIONS = 15
MAX_FUNCTIONS = 100
# Lines shown around each sampled line (the rest of a long function folds to "⋯"), and the sampled
# lines a function's view is built around at most (its hottest by total): a page of a huge function
# stays a page.
CONTEXT = 3
MAX_ANCHORS = 60
# The hottest lines listed at the top of each function.
HOTTEST = 5
# A function with less than this share of the shown states' samples is not one that matters (the
# imports' single samples at a target's start), whatever room is left.
MIN_SHARE = 0.005


def _zeros() -> list:
    return [0] * len(STATE_NAMES)


@dataclass
class LineTime:
    """Samples per state (indexed like STATE_NAMES) of one line."""

    self: list = field(default_factory=_zeros)
    total: list = field(default_factory=_zeros)


@dataclass
class FunctionTime:
    function: str
    file: str
    self: list = field(default_factory=_zeros)
    total: list = field(default_factory=_zeros)
    lines: dict = field(default_factory=dict)  # line number -> LineTime

    def line(self, number: int) -> LineTime:
        got = self.lines.get(number)
        if got is None:
            got = self.lines[number] = LineTime()
        return got

    def ranked_by(self, states: Iterable[int]) -> tuple:
        states = tuple(states)
        return (sum(self.self[s] for s in states), sum(self.total[s] for s in states))

    def hottest(self, states: Iterable[int], limit: int = HOTTEST) -> list:
        """Line numbers with self samples in ``states``, the most first (ties: the earlier line)."""
        states = tuple(states)
        scored = [(sum(t.self[s] for s in states), n) for n, t in self.lines.items()]
        return [n for score, n in sorted(scored, key=lambda x: (-x[0], x[1])) if score > 0][:limit]

    def shown_lines(self) -> list:
        """Line numbers a reader is shown, in file order: each sampled line (its hottest MAX_ANCHORS
        by total) with CONTEXT lines either side, from the function's first sampled line on."""
        anchors = sorted(self.lines, key=lambda n: (-sum(self.lines[n].total), n))[:MAX_ANCHORS]
        wanted: set = set()
        for n in anchors:
            wanted.update(range(max(n - CONTEXT, 1), n + CONTEXT + 1))
        return sorted(wanted)


def python_line(frame) -> Optional[int]:
    """The frame's Python line, or None for a C frame or a frame without one."""
    line = frame[2] if len(frame) > 2 else None
    if not isinstance(line, int) or is_native(line) or line <= 0:
        return None
    return line


def line_times(sessions: Iterable[Session]) -> dict:
    """{(function, file): FunctionTime} over every sample of ``sessions`` (every thread and state)."""
    out: dict = {}
    for session in sessions:
        # Each stack's frames resolved once, then weighed by every (thread, state) that saw it.
        by_stack: dict = {}
        for (_tid, state, stack_id), n in session.counts.items():
            if stack_id == NO_STACK or n <= 0:
                continue
            got = by_stack.get(stack_id)
            if got is None:
                got = by_stack[stack_id] = _stack_lines(session, stack_id)
            inner, functions, lines = got
            for key in functions:
                f = out.get(key)
                if f is None:
                    f = out[key] = FunctionTime(*key)
                f.total[state] += n
            for key, number in lines:
                out[key].line(number).total[state] += n
            if inner is not None:
                key, number = inner
                f = out[key]
                f.self[state] += n
                if number is not None:
                    f.line(number).self[state] += n
    return out


def _stack_lines(session: Session, stack_id: int) -> tuple:
    """(innermost Python (key, line) or None, {function keys}, {(key, line)}) of one stack."""
    inner = None
    functions: dict = {}
    lines: dict = {}
    for frame_id in session.stacks.get(stack_id, ()):
        frame = session.frames.get(frame_id)
        if frame is None or is_native(frame[2] if len(frame) > 2 else None):
            continue
        key = (str(frame[0]), str(frame[1]))
        number = python_line(frame)
        if inner is None:
            inner = (key, number)
        functions[key] = None
        if number is not None:
            lines[(key, number)] = None
    return inner, list(functions), list(lines)


def shown_states(idle: bool = False) -> tuple:
    """The states a function is ranked by: all but idle unless ``idle`` (as the flame graph)."""
    return tuple(s for s in range(len(STATE_NAMES)) if idle or s != IDLE)


def hot_functions(times: dict, limit: int = DEFAULT_FUNCTIONS, idle: bool = False) -> list:
    """The ``limit`` FunctionTimes with the most self samples in the shown states (then total),
    each with at least MIN_SHARE of them."""
    states = shown_states(idle)
    ranked = sorted(times.values(), key=lambda f: tuple(-x for x in f.ranked_by(states)) + (f.function, f.file))
    floor = max(1.0, MIN_SHARE * sum(f.ranked_by(states)[0] for f in ranked))
    return [f for f in ranked if f.ranked_by(states)[0] >= floor][: max(0, limit)]
