"""A parent whose forked child spins for 1 s and exits (the parent reaps it), then the parent idles.

Prints "ready" once the child runs.
"""

import os
import time


def short_spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1  # LINE:short_spin


def parent_wait():
    while True:
        time.sleep(0.2)  # LINE:parent_wait


if __name__ == "__main__":
    child = os.fork()
    if child == 0:
        short_spin(1.0)
        os._exit(0)
    print("ready", flush=True)
    os.waitpid(child, 0)
    parent_wait()
