"""Exact mode's CPU-and-I/O workload (the seed's second experiment): two I/O threads sleeping 10 ms in a loop plus one CPU spinner.

The same workload as cpu_and_io_threads.py, with the switch interval given as argv[1] (seconds; default
0.005, CPython's own), set with sys.setswitchinterval before the threads start. On SIGUSR1 the main
thread prints one JSON line: {"switch_interval_s": ..., "io1": [wake-ups, total overshoot s], "io2": [...]}.
"""
import json
import signal
import sys
import threading
import time

SLEEP_S = 0.01
INTERVAL_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.005
sys.setswitchinterval(INTERVAL_S)
overshoot = {}  # thread name -> [wake-ups, total seconds beyond SLEEP_S]


def io_work():
    mine = overshoot[threading.current_thread().name] = [0, 0.0]
    clock = time.monotonic
    while True:
        start = clock()
        time.sleep(SLEEP_S)  # LINE:io_sleep
        mine[0] += 1
        mine[1] += clock() - start - SLEEP_S


def cpu_spin():
    while True:  # LINE:cpu_spin
        pass


def report(signum, frame):
    out = {"switch_interval_s": sys.getswitchinterval()}
    out.update({name: list(v) for name, v in overshoot.items()})
    print(json.dumps(out), flush=True)


signal.signal(signal.SIGUSR1, report)
for name, fn in (("io1", io_work), ("io2", io_work), ("cpu1", cpu_spin)):
    threading.Thread(name=name, target=fn, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
