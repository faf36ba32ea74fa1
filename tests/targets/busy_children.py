"""A parent that forks one busy Python child and spawns another (a fresh interpreter), then idles.

Children: "forked" runs forked_spin(), "spawned" runs spawned_spin() (this file with --spawned).
Prints "ready" once both children run; the children spin until killed (the parent's process group
is killed by the test; each child also exits when its parent is gone).
"""

import os
import subprocess
import sys
import threading
import time


def parent_gone(ppid):
    return os.getppid() != ppid


def forked_spin(ppid):
    x = 0
    while not parent_gone(ppid):
        for _ in range(10000):
            x += 1  # LINE:forked_spin


def spawned_spin(ppid):
    x = 0
    while not parent_gone(ppid):
        for _ in range(10000):
            x += 1  # LINE:spawned_spin


def parent_wait():
    while True:
        time.sleep(0.5)  # LINE:parent_wait


if __name__ == "__main__":
    if sys.argv[1:] == ["--spawned"]:
        spawned_spin(os.getppid())
        sys.exit(0)
    me = os.getpid()
    child = os.fork()
    if child == 0:
        threading.current_thread().name = "forked-main"
        forked_spin(me)
        os._exit(0)
    spawned = subprocess.Popen([sys.executable, __file__, "--spawned"])
    time.sleep(0.3)  # let the spawned interpreter initialise
    print("ready", flush=True)
    try:
        parent_wait()
    finally:
        spawned.kill()
