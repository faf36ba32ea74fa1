"""A prefork server's shape with NumPy workers: the parent imports NumPy, forks WORKERS workers and
waits; each worker multiplies 256x256 matrices (OpenBLAS's dgemm, the GIL released) in a loop, its
OpenBLAS pool threads (no Python stack, named after the process) computing beside it. Prints
"ready" once every worker has multiplied; a worker exits when its parent is gone."""
import os
import sys
import time

import numpy

WORKERS = 2


def work(ppid, ready_fd):
    a = numpy.random.default_rng(os.getpid()).standard_normal((256, 256))
    b = a.T.copy()
    a @ b
    os.write(ready_fd, b"x")
    while os.getppid() == ppid:
        for _ in range(20):
            a @ b  # LINE:matmul
        time.sleep(0.001)
    os._exit(0)


if __name__ == "__main__":
    r, w = os.pipe()
    me = os.getpid()
    for _ in range(WORKERS):
        if os.fork() == 0:
            work(me, w)
    for _ in range(WORKERS):
        os.read(r, 1)
    print("ready", flush=True)
    while True:
        time.sleep(0.5)  # LINE:parent
