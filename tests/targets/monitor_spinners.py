"""In-process monitor target: two threads spin for a while (each should hold the GIL about half the
time and wait the other half), a short-lived thread sleeps 0.6 s and exits ~2 s before the stats are
read, the main thread sleeps, then collects garbage N times; prints
gilty.gil_stats() as JSON. Argument: interval seconds, spin seconds, collections.

On a busy machine the monitor's thread may not get a CPU for longer than the short-lived thread
lives: the short-lived thread ends only once the monitor has listed it (evidence, capped at 30 s),
so a thread that exited is checked for being kept, not for being seen in time."""

import json
import sys
import threading
import time
import gc

import gilty
import gilty.observe.monitor

interval, spin_s, collections = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
gilty.observe.monitor.start(interval)


def spin():
    end = time.monotonic() + spin_s
    while time.monotonic() < end:
        pass


CAP_S = 30.0


def wait_until(seen) -> None:
    deadline = time.monotonic() + CAP_S
    while not seen() and time.monotonic() < deadline:
        time.sleep(0.01)


def listed(name: str) -> bool:
    return any(t["name"] == name and t["windows"]["total"]["samples"] for t in gilty.gil_stats()["threads"])


seen_short = threading.Event()


def short_lived():
    time.sleep(0.6)
    seen_short.wait(CAP_S)


wait_until(lambda: gilty.gil_stats()["passes"] >= 1)
short = threading.Thread(target=short_lived, name="short-lived")
short.start()
wait_until(lambda: listed("short-lived"))
seen_short.set()
short.join()
threads = [threading.Thread(target=spin, name=f"spinner-{i}") for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for _ in range(collections):
    gc.collect()
print(json.dumps(gilty.gil_stats()), flush=True)
gilty.observe.monitor.stop()
