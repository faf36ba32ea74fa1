"""In-process monitor target: two threads spin for a while (each should hold the GIL about half the
time and wait the other half), a short-lived thread sleeps 0.6 s and exits ~2 s before the stats are
read, the main thread sleeps, then collects garbage N times; prints
gilty.gil_stats() as JSON. Argument: interval seconds, spin seconds, collections."""

import json
import sys
import threading
import time
import gc

import gilty
import gilty.monitor

interval, spin_s, collections = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
gilty.monitor.start(interval)


def spin():
    end = time.monotonic() + spin_s
    while time.monotonic() < end:
        pass


short = threading.Thread(target=time.sleep, args=(0.6,), name="short-lived")
short.start()
short.join()
threads = [threading.Thread(target=spin, name=f"spinner-{i}") for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for _ in range(collections):
    gc.collect()
print(json.dumps(gilty.gil_stats()), flush=True)
gilty.monitor.stop()
