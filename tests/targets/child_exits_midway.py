"""A parent that, on SIGUSR1, forks a child that spins for 1 s and exits (the parent reaps it), then
the parent idles.

Prints "ready" once the handler is set. The test sends SIGUSR1 once gilty says it is recording, so
the child is born inside the recording however long gilty took to start on a busy machine.
"""

import os
import signal
import time


def short_spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1  # LINE:short_spin


def parent_wait():
    while True:
        time.sleep(0.2)  # LINE:parent_wait


def fork_child(signum, frame):
    child = os.fork()
    if child == 0:
        short_spin(1.0)
        os._exit(0)
    os.waitpid(child, 0)


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, fork_child)
    print("ready", flush=True)
    parent_wait()
