"""The bound on what a free-threaded build gives back, from each thread's state shares.

For one thread, a free-threaded build removes its waits for the GIL and slows its own Python time
by the build's single-thread slowdown; the rest of its time stays as measured: native code, waits
for a CPU (the host's other load) and idle time (the I/O and sleeps its work includes). Its work
then goes ``1 / (slowed Python + native + CPU waits + idle) - 1`` faster, as a share of its time.

A group of threads (a process, a pool) gains the mean of its threads' gains weighted by how busy
each was (time holding, waiting for the GIL, in native code or waiting for a CPU): a thread that
only sleeps or waits in ``join`` does no work to speed up. That is capped by the CPUs: the CPU time
the same work needs without the GIL (Python slowed, plus native) cannot take less than itself spread
over the CPUs available. The high end is that. The low end also counts the group's waits for a CPU
as CPU it needs (on a saturated host its threads would meet each other there), which lowers it
only where the host was short of CPUs.

Both assume no new contention on other locks once the GIL is gone: a free-threaded build's own
per-object locks, and the program's, can only lower what is found here. Python time is time on a
CPU holding the GIL: a holder preempted by the kernel is counted as waiting for a CPU. The longest
holder's own Python time (slowed) is reported as what stays serial anyway.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class ThreadShares:
    """One thread's fractions of its sampled time in each state (they add up to 1)."""

    tid: int
    name: str
    seconds: float  # the thread's sampled time
    holding: float  # running Python with the GIL (collections and preempted holds included)
    waiting: float  # waiting for the GIL
    native: float  # running C code without the GIL
    cpu_wait: float  # runnable without the GIL, waiting for a CPU
    idle: float  # blocked (I/O, locks, sleeps) and unknown

    @property
    def busy(self) -> float:
        """The share of its time the thread had work: holding, waiting for the GIL, native, CPU waits."""
        return self.holding + self.waiting + self.native + self.cpu_wait

    def gain(self, slowdown: float) -> float:
        """How much faster its work goes without the GIL (0.5 = 50 % more per second)."""
        after = (1.0 + slowdown) * self.holding + self.native + self.cpu_wait + self.idle
        return 1.0 / after - 1.0 if after > 0 else 0.0


@dataclass(frozen=True)
class Bound:
    """What a free-threaded build could change for a group of threads (a process or a pool)."""

    seconds: float  # wall time the work took under the GIL
    gil_wait_s: float  # thread-seconds spent waiting for the GIL: what the build gives back
    serial_s: float  # the longest holder's own Python time, slowed: serial anyway
    serial_tid: Optional[int]
    serial_name: str
    cpu_s: float  # CPU time the work needs without the GIL (Python slowed, plus native)
    cpus: float
    throughput_low: float  # fractional gain, e.g. 0.8 = 80 % more work per second (can be negative)
    throughput_high: float
    latency_low: float  # fractional cut of a thread's time per unit of work (idle kept)
    latency_high: float  # the same over its busy time only
    limited_by: str  # "cpus" or "threads": what bounds the high end
    working_threads: int
    thread_s: float  # summed sampled time of the group's threads
    busy_s: float  # summed time its threads had work (``ThreadShares.busy``)

    @property
    def gil_cost(self) -> float:
        """The GIL's share of the group's busy thread time."""
        return self.gil_wait_s / self.busy_s if self.busy_s else 0.0


def estimate(threads: list, cpus: float, slowdown: float) -> Bound:
    """The bound for ``threads`` (ThreadShares) on ``cpus`` CPUs with a single-thread ``slowdown``
    (0.1 = Python code runs 10 % slower on the free-threaded build)."""
    if cpus <= 0:
        raise ValueError("cpus must be positive")
    if slowdown < 0:
        raise ValueError("slowdown must not be negative")
    s = 1.0 + slowdown
    seconds = max((t.seconds for t in threads), default=0.0)
    thread_s = sum(t.seconds for t in threads)
    gil_wait_s = sum(t.waiting * t.seconds for t in threads)
    cpu_s = sum((s * t.holding + t.native) * t.seconds for t in threads)
    working = [t for t in threads if t.busy > 0]
    longest = max(threads, key=lambda t: t.holding * t.seconds, default=None)
    serial_s = s * longest.holding * longest.seconds if longest else 0.0
    weight = sum(t.busy * t.seconds for t in working)
    threads_gain = sum(t.gain(slowdown) * t.busy * t.seconds for t in working) / weight if weight else 0.0
    cpu_wait_s = sum(t.cpu_wait * t.seconds for t in threads)

    def cpu_cap(cpu_needed: float) -> float:
        return seconds * cpus / cpu_needed - 1.0 if cpu_needed > 0 else math.inf

    high = min(threads_gain, cpu_cap(cpu_s))
    low = min(threads_gain, cpu_cap(cpu_s + cpu_wait_s))

    def latency(keep_idle: bool) -> float:
        # Per unit of a thread's work: its time with the GIL against without, weighted by busy time.
        before = after = 0.0
        for t in working:
            idle = t.idle if keep_idle else 0.0
            before += t.seconds * (t.holding + t.waiting + t.native + t.cpu_wait + idle)
            after += t.seconds * (s * t.holding + t.native + t.cpu_wait + idle)
        return 1.0 - after / before if before > 0 else 0.0

    return Bound(
        seconds=seconds,
        gil_wait_s=gil_wait_s,
        serial_s=serial_s,
        serial_tid=longest.tid if longest else None,
        serial_name=longest.name if longest else "",
        cpu_s=cpu_s,
        cpus=cpus,
        throughput_low=low,
        throughput_high=high,
        latency_low=latency(True),
        latency_high=latency(False),
        limited_by="cpus" if cpu_cap(cpu_s) < threads_gain else "threads",
        working_threads=len(working),
        thread_s=thread_s,
        busy_s=weight,
    )
