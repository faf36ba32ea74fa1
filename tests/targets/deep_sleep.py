"""Threads asleep at the bottom of deep recursion: "deep-3000" and "deep-20000" each call descend()
that many times, then sleep in sleep_at_bottom() (the recursion limit is raised to allow it).

    python deep_sleep.py [DEPTH ...]     (default: 3000 20000)
"""
import sys
import threading
import time

DEPTHS = [int(a) for a in sys.argv[1:]] or [3000, 20000]
sys.setrecursionlimit(max(DEPTHS) + 1000)
# 3.10 recurses on the C stack too: room for the deepest thread.
threading.stack_size(512 << 20)


def sleep_at_bottom(started):
    started.set()
    while True:
        time.sleep(3600)  # LINE:bottom


def descend(n, started):
    if n == 0:
        sleep_at_bottom(started)
    descend(n - 1, started)  # LINE:descend


for depth in DEPTHS:
    started = threading.Event()
    threading.Thread(target=descend, args=(depth, started), name=f"deep-{depth}", daemon=True).start()
    started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
