"""Benchmark target for the maximum sampling rate: 32 threads, a few spinning, most sleeping briefly.

--spinners threads (default 4) run a pure-Python loop; the rest loop over a 1-5 ms sleep
and a little Python work, so each sampling pass sees threads in every common state. Each
thread sits --depth frames deep. The main thread (which waits) counts as one of --threads.
Prints "ready <pid>" once all threads run, then runs until SIGTERM/SIGINT.
"""

import argparse
import os
import random
import signal
import sys
import threading
import time

stop = threading.Event()


def spin():
    n = 0
    while not stop.is_set():
        for _ in range(10000):
            n += 1


def nap(seed):
    rng = random.Random(seed)
    acc = {}
    while not stop.is_set():
        time.sleep(rng.uniform(0.001, 0.005))
        for i in range(50):
            acc[i % 7] = acc.get(i % 7, 0) + i


def descend(depth, work, arg):
    if depth > 0:
        return descend(depth - 1, work, arg)
    return work(*arg)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--spinners", type=int, default=4)
    parser.add_argument("--depth", type=int, default=10)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    threads = []
    for i in range(args.threads - 1):  # the main thread is the 32nd
        if i < args.spinners:
            work, arg, name = spin, (), "spin-%d" % (i + 1)
        else:
            work, arg, name = nap, (i,), "nap-%d" % (i + 1)
        threads.append(threading.Thread(target=descend, args=(args.depth, work, arg), name=name, daemon=True))
    for t in threads:
        t.start()
    print("ready %d" % os.getpid(), flush=True)
    while not stop.is_set():
        stop.wait(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
