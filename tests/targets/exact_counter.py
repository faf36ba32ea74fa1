"""A thread that releases and retakes the GIL on every iteration (os.fstat), counting iterations.

Every uprobe left on take_gil/drop_gil costs each iteration a few microseconds, so the rate shows
whether probes are still in place. Every 0.25 s the main thread prints
"rate <iterations per wall second> <iterations per CPU second of the counting thread>"; the second
figure does not depend on how much CPU other processes leave to the target. With argv[1] == "pin" the
process first binds itself (all its threads) to one CPU, the last it may use: unpinned, the per-CPU
rate was seen to jump between ~0.7M and ~1.15M/s on the 2-CPU VM as threads moved; pinned it holds
within a few percent.
"""
import os
import sys
import threading
import time

if sys.argv[1:] == ["pin"]:
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})

mark = (0, 0.0, 0.0)  # (iterations, counter thread's CPU time, monotonic time), updated by the counter


def loop():
    global mark
    fstat, fd = os.fstat, os.open(os.devnull, os.O_RDONLY)
    cpu, clock = time.thread_time, time.monotonic
    n = 0
    while True:
        for _ in range(4096):
            fstat(fd)  # LINE:fstat: the GIL is released around the syscall
        n += 4096
        mark = (n, cpu(), clock())


threading.Thread(target=loop, name="counter", daemon=True).start()
time.sleep(0.1)
print("ready", flush=True)
last = mark
while True:
    time.sleep(0.25)
    now = mark
    dn, dcpu, dt = now[0] - last[0], now[1] - last[1], now[2] - last[2]
    if dcpu > 0 and dt > 0:
        print(f"rate {dn / dt:.0f} {dn / dcpu:.0f}", flush=True)
    last = now
