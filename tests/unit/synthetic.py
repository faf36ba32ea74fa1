"""Builds batches shaped like ``_native.Sampler.collect()`` results, for the pure-Python tests.

Passes are written out thread by thread and folded by ``gilty.sampling.aggregate`` (the pure-Python twin of
the native aggregation) into the batch's runs, counts, blame and pass flags. A pass is a dict {tid: state} or {tid: (state, stack_id)} or {tid: (state, stack_id, syscall)}.
Stacks and frames are sent only in the first batch that uses them, as the native sampler does.
"""

from __future__ import annotations

from gilty.sampling.aggregate import aggregate_rows
from gilty.sampling.session import NO_STACK, NO_SYSCALL, Session, TargetInfo

HOLD, GC, WAIT, NATIVE, IDLE, UNKNOWN, CPU_WAIT = range(7)

# x86_64 numbers, as the native syscall_name() would name them.
FUTEX = 202
CLOCK_NANOSLEEP = 230
EPOLL_WAIT = 232
RECVFROM = 45
PSELECT6 = 270
ACCEPT4 = 288
SYSCALL_NAMES = {
    FUTEX: "futex",
    CLOCK_NANOSLEEP: "clock_nanosleep",
    EPOLL_WAIT: "epoll_wait",
    RECVFROM: "recvfrom",
    PSELECT6: "pselect6",
    ACCEPT4: "accept4",
}


def syscall_name(nr: int) -> str:
    return SYSCALL_NAMES.get(nr, f"syscall_{nr}")


def target(pid: int = 4242, switch_interval_s: float = 0.005) -> TargetInfo:
    return TargetInfo(pid=pid, python_version="3.12.1", executable="/usr/bin/python3.12", switch_interval_s=switch_interval_s)


class BatchBuilder:
    def __init__(self, rate_hz: float = 100.0, names: dict | None = None) -> None:
        self.rate_hz = rate_hz
        self.period = 1.0 / rate_hz
        self.names = dict(names or {})
        self.next_time = 0.0
        self._frames: dict = {}  # (function, file, line) -> frame_id
        self._stacks: dict = {}  # tuple of frame ids -> stack_id
        self._sent_frames: set = set()
        self._sent_stacks: set = set()

    def stack(self, *frames: tuple) -> int:
        """A stack_id for frames given innermost first, each (function, file, line)."""
        ids = []
        for frame in frames:
            ids.append(self._frames.setdefault(tuple(frame), len(self._frames) + 1))
        return self._stacks.setdefault(tuple(ids), len(self._stacks) + 100)

    def batch(
        self,
        passes: list,
        *,
        times: list | None = None,
        exited: bool = False,
        errors: dict | None = None,
        late: int = 0,
        sched: dict | None = None,
    ) -> dict:
        if times is None:
            times = [self.next_time + i * self.period for i in range(len(passes))]
        if times:
            self.next_time = times[-1] + self.period
        rows = []
        used_stacks = set()
        for i, threads in enumerate(passes):
            for tid, value in threads.items():
                if isinstance(value, int):
                    value = (value,)
                state = value[0]
                stack_id = value[1] if len(value) > 1 else NO_STACK
                syscall = value[2] if len(value) > 2 else NO_SYSCALL
                rows.append((i, tid, state, stack_id, syscall))
                if stack_id != NO_STACK:
                    used_stacks.add(stack_id)
        by_id = {sid: frames for frames, sid in self._stacks.items()}
        frame_by_id = {fid: frame for frame, fid in self._frames.items()}
        stacks = {sid: list(by_id[sid]) for sid in used_stacks - self._sent_stacks}
        self._sent_stacks |= set(stacks)
        frames = {}
        for frame_ids in stacks.values():
            for fid in frame_ids:
                if fid not in self._sent_frames:
                    frames[fid] = frame_by_id[fid]
        self._sent_frames |= set(frames)
        seen = {tid for threads in passes for tid in threads}
        return {
            "times": list(times),
            **aggregate_rows(len(passes), rows),
            "stacks": stacks,
            "frames": frames,
            "threads": {tid: self.names.get(tid, f"thread-{tid}") for tid in seen},
            "errors": {"torn_retried": 0, "torn_dropped": 0, "read_failed": 0, **(errors or {})},
            "exited": exited,
            "late": late,
            **({"sched": sched} if sched is not None else {}),
        }


def make_session(batches: list, rate_hz: float = 100.0, switch_interval_s: float = 0.005, pid: int = 4242) -> Session:
    session = Session(target(pid=pid, switch_interval_s=switch_interval_s), rate_hz, start_time=1_700_000_000.0)
    for b in batches:
        session.add_batch(b, syscall_name)
    return session


def contention_session(n_passes: int = 400) -> tuple:
    """The field report's shape: 'metrics' spins holding the GIL; 'io-1' and 'io-2' sleep, wake,
    and wait for it; 'MainThread' waits on a lock. Returns (session, builder)."""
    b = BatchBuilder(names={1: "MainThread", 2: "metrics", 3: "io-1", 4: "io-2"})
    spin = b.stack(("spin", "app.py", 12), ("run", "threading.py", 1010))
    io = b.stack(("io_work", "app.py", 20))
    join = b.stack(("wait", "threading.py", 320), ("main", "app.py", 30))
    passes = []
    for i in range(n_passes):
        # io threads: 6 passes sleeping, then 2 passes waiting for the GIL, then 1 pass holding
        # it briefly (metrics is descheduled that pass: handoff).
        phase = i % 9
        p = {1: (IDLE, join, FUTEX)}
        if phase < 6:
            io_state = (IDLE, io, CLOCK_NANOSLEEP)
        elif phase < 8:
            io_state = (WAIT, io)
        else:
            io_state = None
        if io_state is None:
            p[2] = (WAIT, spin)
            p[3] = (HOLD, io)
            p[4] = (WAIT, io)
        else:
            p[2] = (HOLD, spin)
            p[3] = io_state
            p[4] = io_state
        passes.append(p)
    half = n_passes // 2
    # What the kernel counted: the spinner ran throughout, the io threads a little, nobody queued for
    # a CPU; a cgroup with a quota that never ran out.
    seconds = half * b.period
    sched = {"seconds": seconds, "threads": [(2, int(seconds * 1e9), 0), (3, 1000, 0), (4, 1000, 0)], "cgroup": (10, 0, 0)}
    session = make_session([b.batch(passes[:half], sched=sched), b.batch(passes[half:], sched=sched)])
    return session, b
