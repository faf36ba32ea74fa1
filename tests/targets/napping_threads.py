"""Many threads that change state every few milliseconds: a recording's runs grow fast.

argv[1] threads (default 60): two spin in Python, the rest nap 1-3 ms and then do a little Python
work, so at a high rate each is seen idle, waiting for the GIL and holding it in turn.
"""
import random
import sys
import threading
import time

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 60


def spin():
    n = 0
    while True:
        for _ in range(10000):
            n += 1


def nap(seed):
    rng = random.Random(seed)
    acc = {}
    while True:
        time.sleep(rng.uniform(0.001, 0.003))
        for i in range(50):
            acc[i % 7] = acc.get(i % 7, 0) + i


for i in range(COUNT):
    work, args = (spin, ()) if i < 2 else (nap, (i,))
    threading.Thread(target=work, args=args, name=f"{work.__name__}-{i:02d}", daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
