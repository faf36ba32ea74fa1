"""A multiprocessing pool (fork start method) whose workers each build their own heap when they
start (the pool's initializer), before anyone measures them, then wait for tasks.

Prints ``pids MASTER W1 W2 ...`` once every worker has built its heap, then waits for a line on
stdin and exits. ``POOL_WORKERS`` (default 3) and ``POOL_RECORDS`` (default 150000, about 20 MiB
per worker) set the size; ``POOL_START`` the start method (default fork; spawn also starts
multiprocessing's resource tracker, a helper beside the workers). Automatic GC stays on and nothing is frozen; idle workers run no
collection.
"""

import multiprocessing
import os
import sys

WORKERS = int(os.environ.get("POOL_WORKERS", "3"))
RECORDS = int(os.environ.get("POOL_RECORDS", "150000"))
DATA = None


def build():
    global DATA
    DATA = [("record-%d" % i, [i, i * 0.5]) for i in range(RECORDS)]


def whoami(_):
    import time

    time.sleep(0.2)  # long enough that each worker takes one of the tasks
    return os.getpid()


if __name__ == "__main__":
    ctx = multiprocessing.get_context(os.environ.get("POOL_START", "fork"))
    with ctx.Pool(WORKERS, initializer=build) as pool:
        # Every worker has run its initializer once it has answered a task.
        seen = set()
        while len(seen) < WORKERS:
            seen.update(pool.map(whoami, range(WORKERS), chunksize=1))
        print("pids", os.getpid(), *sorted(seen), flush=True)
        sys.stdin.readline()
