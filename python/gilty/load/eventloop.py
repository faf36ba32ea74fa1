"""Event-loop lag of asyncio servers (uvicorn, gunicorn's uvicorn workers): the loop thread is the one
whose stacks run ``BaseEventLoop._run_once``; it is *at rest* when its innermost frame is the
selector's ``select`` (epoll_wait and friends, or woken there and waiting for a CPU) and it is not
waiting for the GIL. A lag span is a
stretch of consecutive sampling passes in which it was anywhere else: running callbacks, blocked in a
call that should not block, or waiting for the GIL to come back from the selector. Spans longer than
the threshold are reported with the Python code the loop was in meanwhile.

Resolution is the sampling period: a span of k passes stands for about k periods (± one). Runs keep
the stack of their first pass only, so a span's time in each state is spread over where the loop
thread was in that state in all its samples away from the selector (short stretches included).
uvloop's loop is C without Python frames at its
selector, so it is not recognised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gilty.load.sites import is_library, library_prefixes, site_key
from gilty.load.startup import startup_frame
from gilty.sampling.analysis.syscalls import idle_label
from gilty.sampling.session import CPU_WAIT, GC, HOLDING_GIL, IDLE, NATIVE, NO_STACK, WAITING_GIL, Session

DEFAULT_THRESHOLD_S = 0.02
TOP_CULPRITS = 3


def _last(function: str) -> str:
    return function.rsplit(".", 1)[-1]


def _is_run_once(frame: tuple) -> bool:
    return _last(frame[0]) == "_run_once" and frame[1].endswith("asyncio/base_events.py")


def _is_selector(frame: tuple) -> bool:
    return _last(frame[0]) == "select" and frame[1].endswith("selectors.py")


def loop_threads(session: Session) -> list:
    """Tids whose stacks run an asyncio loop, in the order first seen."""
    tids: dict = {}
    seen: set = set()
    for tid, _state, stack_id in session.stack_counts():
        if tid in tids or (tid, stack_id) in seen:
            continue
        seen.add((tid, stack_id))
        if any(_is_run_once(f) for f in session.stack(stack_id)):
            tids[tid] = True
    return list(tids)


@dataclass
class Culprit:
    site: str  # "block (webapp.py:34)": where the loop was, as the application sees it
    caller: Optional[str]
    doing: str  # "running Python", "blocked: sleep (clock_nanosleep)", "waiting for the GIL", ...
    seconds: float  # of lag-span time


@dataclass
class LoopLag:
    pid: int
    tid: int
    thread: str
    threshold_s: float
    at_rest: float  # share of the thread's sampled time back at its selector
    spans: int  # lag spans longer than the threshold
    lag_s: float  # their total length
    lag_share: float  # lag_s / the time the thread was sampled
    max_span_s: float
    culprits: list = field(default_factory=list)  # [Culprit], most lag first
    sampled_s: float = 0.0  # the time the thread was sampled (start-up left out): what shares are of

    def share(self, culprit: Culprit) -> float:
        """A culprit's share of the loop thread's sampled time (they add up to ``lag_share``)."""
        return min(1.0, culprit.seconds / self.sampled_s) if self.sampled_s else 0.0


def _doing(session: Session, state: int, nr: int) -> str:
    if state == HOLDING_GIL:
        return "running Python"
    if state == GC:
        return "collecting garbage"
    if state == WAITING_GIL:
        return "waiting for the GIL"
    if state == NATIVE:
        return "native code"
    if state == IDLE:
        return f"blocked: {idle_label(session.syscall_label(nr))}"
    if state == CPU_WAIT:
        return "waiting for a CPU"
    return "unknown"


def _at_rest(session: Session, state: int, stack_id: int) -> bool:
    # Woken at its selector without a CPU (a busy host) is at rest too: no code of the program keeps the
    # loop from its events; the host does, which the saturation line and `cpu_wait` report.
    if state not in (IDLE, NATIVE, CPU_WAIT) or stack_id == NO_STACK:
        return False
    stack = session.stack(stack_id)
    return bool(stack) and _is_selector(stack[0])


def _starting(session: Session, stack_id: int) -> bool:
    # A worker importing its application blocks its loop too, but that is start-up, not load.
    return stack_id != NO_STACK and startup_frame(session.stack(stack_id)) is not None


def _site(session: Session, stack_id: int, prefixes: tuple) -> tuple:
    """(site label, caller label) of a stack as the application sees it."""
    stack = session.stack(stack_id) if stack_id != NO_STACK else []
    if not stack:
        return "(no Python stack)", None
    function, file, line, caller = site_key(stack, prefixes)
    place = file if is_library(file, prefixes) else f"{file}:{line}"
    return f"{function} ({place})", caller


def _away_sites(session: Session, tid: int, prefixes: tuple) -> dict:
    """{state: {(site, caller): samples}} of a loop thread's samples away from its selector."""
    out: dict = {}
    for (t, state, stack_id), n in session.stack_counts().items():
        if t != tid or _at_rest(session, state, stack_id) or _starting(session, stack_id):
            continue
        key = _site(session, stack_id, prefixes)
        by_site = out.setdefault(state, {})
        by_site[key] = by_site.get(key, 0) + n
    return out


def loop_lag(session: Session, tid: int, threshold_s: float = DEFAULT_THRESHOLD_S) -> Optional[LoopLag]:
    runs = session.thread_runs.get(tid)
    if runs is None or not session.samples:
        return None
    prefixes = library_prefixes(session)
    spans: list = []  # [(first pass, last pass, [(passes, state, stack_id, nr)])]
    current = None
    rest = sampled = 0
    starting: dict = {}
    for first, passes, state, stack_id, nr in runs.runs():
        if stack_id not in starting:
            starting[stack_id] = _starting(session, stack_id)
        if starting[stack_id]:  # neither at rest nor lagging: start-up ends a span and is not counted
            if current is not None:
                spans.append(current)
                current = None
            continue
        sampled += passes
        if _at_rest(session, state, stack_id):
            rest += passes
            if current is not None:
                spans.append(current)
                current = None
            continue
        if current is not None and first != current[1] + 1:  # the thread was not seen meanwhile
            spans.append(current)
            current = None
        if current is None:
            current = [first, first, []]
        current[1] = first + passes - 1
        current[2].append((passes, state, stack_id, nr))
    if current is not None:
        spans.append(current)
    # Runs count kept passes: every pass, or every timeline_step-th of a long recording's.
    kept = len(session.times)
    period = session.duration_s / kept
    long_spans = []
    for first, last, parts in spans:
        length = session.pass_end(min(last, kept - 1)) - session.pass_start(first)
        if length >= threshold_s:
            long_spans.append((length, parts))
    # A stretch keeps only the stack of its first sample (a CPU-bound callback's stretch may begin in
    # `_run_once`), so its time is spread over where the loop thread was, in the same state, in all its
    # samples away from the selector (from the step's stack counts); the first stack is the fallback.
    where = _away_sites(session, tid, prefixes)
    # A span's measured length is shared among its parts by passes, so the culprits add up to lag_s
    # (a share of it is at most 100 % by construction, however late the passes were taken).
    culprits: dict = {}
    for length, parts in long_spans:
        span_passes = sum(p[0] for p in parts) or 1
        for passes, state, stack_id, nr in parts:
            doing = _doing(session, state, nr)
            spread = where.get(state) or {_site(session, stack_id, prefixes): 1}
            total = sum(spread.values())
            for (site, caller), n in spread.items():
                key = (site, caller, doing)
                culprits[key] = culprits.get(key, 0.0) + length * passes / span_passes * n / total
    lag_s = sum(length for length, _ in long_spans)
    sampled_s = sampled * period or 1.0
    ranked = sorted(culprits.items(), key=lambda kv: -kv[1])[:TOP_CULPRITS]
    return LoopLag(
        pid=session.target.pid,
        tid=tid,
        thread=session.thread_name(tid),
        threshold_s=threshold_s,
        at_rest=rest / sampled if sampled else 0.0,
        spans=len(long_spans),
        lag_s=lag_s,
        lag_share=min(1.0, lag_s / sampled_s),
        max_span_s=max((length for length, _ in long_spans), default=0.0),
        culprits=[Culprit(site, caller, doing, seconds) for (site, caller, doing), seconds in ranked],
        sampled_s=sampled * period,
    )


def loop_lags(sessions: list, threshold_s: float = DEFAULT_THRESHOLD_S) -> list:
    """[LoopLag] of every asyncio loop thread in the sessions, the most lagging first."""
    out = []
    for s in sessions:
        for tid in loop_threads(s):
            lag = loop_lag(s, tid, threshold_s)
            if lag is not None:
                out.append(lag)
    out.sort(key=lambda lag: -lag.lag_share)
    return out
