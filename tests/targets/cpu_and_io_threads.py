"""Seed, Experiment 2: the two I/O threads of Experiment 1 plus one CPU-bound thread: a GIL convoy.

The I/O threads time each time.sleep(0.01): what it overshoots by is mostly the wait to take the
GIL back (wake-up latency and timer slack are ~0.1 ms). On SIGUSR1 the main thread prints one JSON
line, {"io1": [wake-ups, total overshoot in s], "io2": [...]}, so a test can compare what gilty
measured from outside with what the threads went through.
"""
import json
import signal
import threading
import time

SLEEP_S = 0.01
overshoot = {}  # thread name -> [wake-ups, total seconds beyond SLEEP_S]


def io_work():
    mine = overshoot[threading.current_thread().name] = [0, 0.0]
    clock = time.monotonic
    while True:
        start = clock()
        time.sleep(SLEEP_S)
        extra = clock() - start - SLEEP_S
        mine[0] += 1
        mine[1] += extra


def cpu_spin():
    while True:
        pass


def report(signum, frame):
    print(json.dumps({name: list(v) for name, v in overshoot.items()}), flush=True)


signal.signal(signal.SIGUSR1, report)
io1 = threading.Thread(name="io1", target=io_work, daemon=True)
io2 = threading.Thread(name="io2", target=io_work, daemon=True)
cpu1 = threading.Thread(name="cpu1", target=cpu_spin, daemon=True)
io1.start()
io2.start()
cpu1.start()
print("ready", flush=True)
threading.Event().wait()
