"""Known garbage collections: gc.collect() (generation 2) every 100 ms plus automatic gen-0 collections.

Each round the main thread, with automatic collection paused, makes CYCLES self-referencing lists,
drops them and calls gc.collect(): that collection finds at least CYCLES unreachable objects. The rest
of the round (until 100 ms) it makes short-lived cycles with the collector enabled, so the interpreter
runs its automatic young-generation collections. On SIGUSR1 it prints one JSON line:
{"calls": gc.collect() calls so far, "min_collected": smallest value they returned, "cycles": CYCLES,
"t": time.monotonic()}.
"""
import gc
import json
import signal
import time

CYCLES = 1000
ROUND_S = 0.1
stats = {"calls": 0, "min_collected": None, "cycles": CYCLES}


def report(signum, frame):
    print(json.dumps(dict(stats, t=time.monotonic())), flush=True)


def make_cycles(n):
    keep = []
    for _ in range(n):
        a = []
        a.append(a)
        keep.append(a)
    return keep


signal.signal(signal.SIGUSR1, report)
print("ready", flush=True)
clock = time.monotonic
while True:
    start = clock()
    gc.disable()  # no automatic collection may take some of the cycles first
    keep = make_cycles(CYCLES)
    del keep
    collected = gc.collect()  # LINE:collect
    gc.enable()
    stats["calls"] += 1
    if stats["min_collected"] is None or collected < stats["min_collected"]:
        stats["min_collected"] = collected
    while clock() - start < ROUND_S:
        for _ in range(1000):
            b = []
            b.append(b)  # LINE:churn
