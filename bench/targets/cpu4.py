"""Benchmark target: N (default 4) threads spinning in a pure-Python loop; measures its own throughput.

Protocol (stdin/stdout, one line each):
  target prints   "ready <pid>"      once every thread spins (warm-up starts)
  driver writes   "go"               when the sampler under test is attached
  target prints   {"iterations": ..., "window_s": ..., "ips": ..., "cpu_s": ..., ...}
                  after --window seconds, then exits.

Each thread calls down --depth Python frames before looping, so a sampler walks realistic
stacks. Threads publish their counters every 1024 iterations; the main thread reads them
at the start and end of the window and sleeps in between. Runs on any CPython 3.x.
"""

import argparse
import json
import os
import sys
import threading
import time

counts = []
stop = False
started = threading.Event()


def spin(slot):
    n = 0
    while not stop:
        n += 1
        if n & 1023 == 0:
            counts[slot] = n


def descend(depth, slot):
    if depth > 0:
        return descend(depth - 1, slot)
    # Spin only once every thread is started: starting a thread needs the GIL, and with many threads
    # already spinning each start waits behind all of them (200 threads took minutes).
    started.wait()
    return spin(slot)


def main():
    global stop
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--window", type=float, default=4.0, help="measurement window, seconds")
    parser.add_argument("--depth", type=int, default=10, help="extra Python frames under each spinning loop")
    args = parser.parse_args()

    counts.extend([0] * args.threads)
    threads = [
        threading.Thread(target=descend, args=(args.depth, i), name="spin-%d" % (i + 1), daemon=True) for i in range(args.threads)
    ]
    for t in threads:
        t.start()
    started.set()
    # Ready once every thread has spun, or after 5 s: with hundreds of threads some may wait that long
    # for their first turn with the GIL on a busy machine (the window counts all iterations anyway).
    deadline = time.monotonic() + 5.0
    while not all(counts) and time.monotonic() < deadline:
        time.sleep(0.01)
    print("ready %d" % os.getpid(), flush=True)

    if sys.stdin.readline().strip() != "go":
        return 2
    c0, t0, cpu0 = sum(counts), time.perf_counter(), time.process_time()
    time.sleep(args.window)
    c1, t1, cpu1 = sum(counts), time.perf_counter(), time.process_time()
    stop = True
    window = t1 - t0
    cpu = cpu1 - cpu0
    iterations = c1 - c0
    print(
        json.dumps(
            {
                "threads": args.threads,
                "iterations": iterations,
                "window_s": window,
                "ips": iterations / window,
                "cpu_s": cpu,
                "ips_per_cpu_s": iterations / cpu if cpu > 0 else None,
                "python": sys.version.split()[0],
            }
        ),
        flush=True,
    )
    for t in threads:
        t.join(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
