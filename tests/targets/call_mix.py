"""The main thread alternates call-heavy work (20-deep recursions) with work that calls nothing,
each for a random length around half a millisecond (random, so that no phase keeps step with a
sampling period), and times both in-process: the truth a sampled profile is held to.

Each SIGUSR1 prints the seconds spent so far in each phase as one JSON line.
"""
import json
import random
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
    calls(random.randint(50, 350))
    t1 = clock()
    flat(random.randint(2000, 14000))
    t2 = clock()
    spent["calls"] += t1 - t0
    spent["flat"] += t2 - t1
