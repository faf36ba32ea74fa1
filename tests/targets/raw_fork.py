"""Forks with libc's fork() directly, as uWSGI forks its workers: the child's interpreter is never told
(no PyOS_AfterFork_Child), so its thread state keeps the parent's native thread id. The child spins in
child_spin(); the parent prints "ready" and the child's pid, and waits.
"""
import ctypes
import os
import time


def child_spin():
    x = 0
    while True:
        for _ in range(10000):
            x += 1  # LINE:child_spin
        if os.getppid() == 1:
            os._exit(0)


libc = ctypes.CDLL(None, use_errno=True)
pid = libc.fork()
if pid == 0:
    child_spin()
print("ready", flush=True)
print(pid, flush=True)
while True:
    time.sleep(3600)
