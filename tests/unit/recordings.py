"""Recordings for the renderer tests: one process, two processes, and a hostile function name."""

from __future__ import annotations

from gilty.sampling.session import Recording
from synthetic import GC, HOLD, IDLE, WAIT, BatchBuilder, contention_session, make_session

HOSTILE = "</script><img src=x onerror=alert(1)>"


def one_process() -> Recording:
    session, _ = contention_session()
    return Recording.of(session)


def worker_session(pid: int = 5151):
    """A second process: 'worker' runs ``crunch`` with a semicolon and a newline in its file
    name and a hostile function name, and collects garbage now and then."""
    b = BatchBuilder(names={10: "worker", 11: "MainThread"})
    crunch = b.stack(("crunch", "odd;name\nfile.py", 7), ("main", "worker.py", 3))
    hostile = b.stack((HOSTILE, "evil&<file>.py", 1), ("main", "worker.py", 3))
    passes = []
    for i in range(100):
        state = GC if i % 10 == 9 else HOLD
        stack = hostile if i % 4 == 0 else crunch
        passes.append({10: (state, stack), 11: (WAIT if i % 10 == 9 else IDLE, crunch)})
    session = make_session([b.batch(passes)])
    session.target.pid = pid
    return session


def two_processes() -> Recording:
    first, _ = contention_session()
    rec = Recording([first, worker_session()], rate_hz=100.0, start_time=first.start_time)
    rec.duration_s = 4.0
    return rec


def thread_pool() -> Recording:
    """MainThread holds the GIL in `render`; eight ThreadPoolExecutor-0_N threads wait for it."""
    names = {1: "MainThread", **{10 + i: f"ThreadPoolExecutor-0_{i}" for i in range(8)}}
    b = BatchBuilder(names=names)
    render = b.stack(("render", "/srv/app/views.py", 40))
    fetch = b.stack(("fetch", "/srv/app/io.py", 9))
    passes = [{1: (HOLD, render), **{10 + i: (WAIT, fetch) for i in range(8)}} for _ in range(100)]
    return Recording.of(make_session([b.batch(passes)]))
