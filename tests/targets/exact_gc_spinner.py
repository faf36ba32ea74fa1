"""A GC-churning thread beside a CPU spinner.

"gc-churner" makes self-referencing lists (cyclic garbage) as fast as it can, so the collector runs
automatically (default thresholds) over a live population of 200k objects; "spinner" is a busy loop.
"""
import gc
import threading
import time

KEEP = [[i] for i in range(200_000)]  # live objects every collection of the old generations traverses


def churn_forever():
    while True:
        a = []
        a.append(a)  # LINE:churn


def spin_forever():
    x = 0
    while True:  # LINE:spin
        x += 1


assert gc.isenabled()
threading.Thread(target=churn_forever, name="gc-churner", daemon=True).start()
threading.Thread(target=spin_forever, name="spinner", daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
