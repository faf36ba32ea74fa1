"""The bundled demo service: a small task scheduler with a GIL problem.

Shaped like the task scheduler in "Is it me, or the GIL?" (Christoph Heer, EuroPython 2019),
where a metrics thread held the GIL about 75% of the time and the I/O threads queued behind it:

* ``MainThread`` schedules work: every few milliseconds it hands a task to each I/O worker
  over a local socketpair;
* ``io-1`` .. ``io-4`` block in ``recv()`` for their next task, then make a short "API call"
  (a sleep of a few ms) and do a little Python bookkeeping: short blocking calls, very
  little CPU; each wake-up needs the GIL back;
* ``metrics`` aggregates and serialises fake metrics in pure Python in a loop: it wants the
  GIL all the time, and is what the I/O threads end up waiting for;
* ``hasher`` checksums a large buffer with ``hashlib.sha256``, which releases the GIL: busy,
  but in native code, so it is not anybody's problem.

Prints ``ready`` (and flushes) once every thread runs; stops cleanly on SIGTERM or SIGINT.

    python -m gilty.demo.service [--io-threads N]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import signal
import socket
import sys
import threading
import time
from typing import Optional

# How often the scheduler hands each I/O worker a task, and how long their "API call" blocks.
SCHEDULE_PERIOD_S = 0.004
API_CALL_S = (0.001, 0.004)
HASH_BUFFER_BYTES = 16 * 1024 * 1024
# One metrics flush is ~6 ms of pure Python, then a ~1.5 ms blocking "ship": the metrics
# thread ends up holding the GIL roughly three quarters of the time, as in the field report.
SAMPLES_PER_SERIES = 1600
SHIP_S = 0.0015
METRIC_NAMES = [f"scheduler.{area}.{what}" for area in ("offers", "tasks", "agents", "http") for what in ("count", "latency_ms", "bytes", "errors")]

stop = threading.Event()


def handle_api_reply(task: bytes, stats: dict) -> None:
    """The little bit of Python an I/O worker runs per task."""
    stats["tasks"] = stats.get("tasks", 0) + 1
    stats["bytes"] = stats.get("bytes", 0) + len(task)


def io_worker(sock: socket.socket, stats: dict) -> None:
    rng = random.Random(threading.get_ident())
    while not stop.is_set():
        try:
            task = sock.recv(64)  # wait for the scheduler: blocking I/O, GIL released
        except OSError:
            break
        if not task:
            break
        time.sleep(rng.uniform(*API_CALL_S))  # the "API call": blocking, GIL released
        handle_api_reply(task, stats)


def aggregate_metrics(samples: dict) -> dict:
    """Percentiles and means of every series, in pure Python: CPU-bound, holds the GIL."""
    report = {}
    for name, values in samples.items():
        ordered = sorted(values)
        n = len(ordered)
        total = 0.0
        for v in ordered:
            total += v
        report[name] = {
            "count": n,
            "mean": total / n,
            "p50": ordered[n // 2],
            "p99": ordered[min(n - 1, (n * 99) // 100)],
        }
    return report


def serialise_metrics(report: dict) -> str:
    """A statsd/graphite-like text rendering, built line by line in Python."""
    lines = []
    for name, fields in report.items():
        for key, value in fields.items():
            lines.append(f"{name}.{key} {value:.3f}")
    return "\n".join(lines)


def collect_samples(rng: random.Random) -> dict:
    """Fake raw measurements since the last flush."""
    return {name: [rng.random() * 100 for _ in range(SAMPLES_PER_SERIES)] for name in METRIC_NAMES}


def metrics_collector(shipped: list) -> None:
    rng = random.Random(7)
    while not stop.is_set():
        text = serialise_metrics(aggregate_metrics(collect_samples(rng)))
        time.sleep(SHIP_S)  # "send to the metrics backend": the one moment it lets go of the GIL
        shipped[0] += len(text)


def hasher(digests: list) -> None:
    buffer = bytes(range(256)) * (HASH_BUFFER_BYTES // 256)
    while not stop.is_set():
        digests[0] = hashlib.sha256(buffer).hexdigest()  # releases the GIL for large buffers


def schedule(workers: list) -> None:
    """The main thread: hand every worker a task each period until told to stop."""
    n = 0
    next_due = time.monotonic()
    while not stop.is_set():
        n += 1
        task = b"task-%d" % n
        for sock in workers:
            try:
                sock.send(task)
            except (BlockingIOError, InterruptedError):
                pass  # the worker is behind: drop this task rather than block the scheduler
        next_due += SCHEDULE_PERIOD_S
        delay = next_due - time.monotonic()
        if delay > 0:
            stop.wait(delay)
        else:
            next_due = time.monotonic()


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gilty.demo.service", description=__doc__.splitlines()[0])
    parser.add_argument("--io-threads", type=int, default=4, help="number of I/O worker threads (default 4)")
    args = parser.parse_args(argv)

    def on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    threads = []
    scheduler_ends = []
    worker_ends = []
    for i in range(args.io_threads):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        scheduler_ends.append(ours)
        worker_ends.append(theirs)
        threads.append(threading.Thread(target=io_worker, args=(theirs, {}), name=f"io-{i + 1}", daemon=True))
    threads.append(threading.Thread(target=metrics_collector, args=([0],), name="metrics", daemon=True))
    threads.append(threading.Thread(target=hasher, args=([""],), name="hasher", daemon=True))
    for t in threads:
        t.start()

    print("ready", flush=True)
    try:
        schedule(scheduler_ends)
    finally:
        stop.set()
        for sock in scheduler_ends:
            sock.close()  # wakes the workers' recv() with EOF
        for t in threads:
            t.join(timeout=2.0)
        for sock in worker_ends:
            sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
