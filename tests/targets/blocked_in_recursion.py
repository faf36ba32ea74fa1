"""Thread "recurser" blocks at the bottom of recurse(50): 51 nested frames of recurse."""
import threading
import time

DEPTH = 50


def recurse(n, started):
    if n == 0:
        started.set()
        while True:
            time.sleep(3600)  # LINE:bottom
    recurse(n - 1, started)  # LINE:recurse


started = threading.Event()
threading.Thread(target=recurse, args=(DEPTH, started), name="recurser", daemon=True).start()
started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
