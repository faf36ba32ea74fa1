"""The main thread alternates call-heavy work (20-deep recursions) with work that calls nothing,
about half a millisecond each, and times both in-process: the truth a sampled profile is held to.

Each SIGUSR1 prints the seconds spent so far in each phase as one JSON line.
"""
import json
import signal
import time


def recurse(x):
    if x == 0:
        return
    recurse(x - 1)


def calls(n):
    for _ in range(n):
        recurse(20)


def flat(n):
    x = 0
    for i in range(n):
        x += i
    return x


spent = {"calls": 0.0, "flat": 0.0}


def report(_signum, _frame):
    print(json.dumps(spent), flush=True)


signal.signal(signal.SIGUSR1, report)
print("ready", flush=True)
clock = time.perf_counter
while True:
    t0 = clock()
    calls(200)
    t1 = clock()
    flat(8000)
    t2 = clock()
    spent["calls"] += t1 - t0
    spent["flat"] += t2 - t1
