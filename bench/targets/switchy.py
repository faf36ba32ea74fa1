"""Benchmark target: N (default 8) threads each releasing and retaking the GIL as fast as they can
(time.sleep(0) is a blocking call that returns at once), plus one pure-Python spinner: a worst case
for exact mode, which takes ~3 probe hits per GIL handoff. Same protocol as cpu4.py: prints
"ready <pid>", waits for "go" on stdin, measures --window seconds, prints JSON and exits.
"""

import argparse
import json
import os
import sys
import threading
import time

counts = []
stop = False


def blocker(slot):
    n = 0
    while not stop:
        time.sleep(0)
        n += 1
        if n & 63 == 0:
            counts[slot] = n


def spinner(slot):
    n = 0
    while not stop:
        n += 1
        if n & 1023 == 0:
            counts[slot] = n


def main():
    global stop
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--window", type=float, default=4.0)
    a = p.parse_args()
    counts.extend([0] * (a.threads + 1))
    threads = [threading.Thread(target=blocker, args=(i,), daemon=True) for i in range(a.threads)]
    threads.append(threading.Thread(target=spinner, args=(a.threads,), daemon=True))
    for t in threads:
        t.start()
    time.sleep(0.5)
    print(f"ready {os.getpid()}", flush=True)
    sys.stdin.readline()
    start, t0 = list(counts), time.monotonic()
    time.sleep(a.window)
    end, t1 = list(counts), time.monotonic()
    stop = True
    blocked = sum(end[i] - start[i] for i in range(a.threads))
    spun = end[a.threads] - start[a.threads]
    print(json.dumps({"window_s": t1 - t0, "sleeps_per_s": blocked / (t1 - t0), "spins_per_s": spun / (t1 - t0)}), flush=True)


if __name__ == "__main__":
    main()
