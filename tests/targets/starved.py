"""A target for CPU starvation: pins itself to one CPU (argv[1]; "-" for none) before starting its
threads, then runs one workload (argv[2]):
- spin: the main thread runs pure Python forever (holds the GIL, never waits for it);
- select: the main thread waits in `EpollSelector.select` with a short timeout, then does a little
  Python work, forever (an event loop with nothing ready);
- multiply: 4 threads each sleep 0.1 ms, then build a 4 MiB `bytes` by multiplication (the GIL held
  inside C), forever;
- sleeper: the main thread alone sleeps 0.1 ms, then does a little Python work, forever (it takes
  the GIL back after every sleep, with nobody to wait for);
- fft: 1 thread runs NumPy FFTs (which release the GIL) forever, the main thread sleeps.
The test pins a CPU hog to the same CPU, so the threads are runnable without a CPU about half the time.
"""
import os
import selectors
import socket
import sys
import threading
import time

if sys.argv[1] != "-":
    os.sched_setaffinity(0, {int(sys.argv[1])})
mode = sys.argv[2]


def spin():
    x = 0
    while True:
        x += 1


def select_loop():
    sel = selectors.EpollSelector()
    a, b = socket.socketpair()
    sel.register(a, selectors.EVENT_READ)
    n = 0
    while True:
        sel.select(timeout=0.002)
        n = sum(range(50)) + n % 7


def multiply():
    block = b"x" * 1024
    while True:
        time.sleep(0.0001)
        _ = block * 4096  # 4 MiB, built with the GIL held


def sleeper():
    n = 0
    while True:
        time.sleep(0.0001)
        n = sum(range(200)) + n % 7


def fft():
    import numpy

    data = numpy.random.default_rng(1).standard_normal(1 << 18)
    while True:
        numpy.fft.fft(data)


if mode == "spin":
    print("ready", flush=True)
    spin()
elif mode == "select":
    print("ready", flush=True)
    select_loop()
elif mode == "sleeper":
    print("ready", flush=True)
    sleeper()
elif mode == "multiply":
    for i in range(4):
        threading.Thread(target=multiply, name=f"multiply-{i}", daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()
elif mode == "fft":
    threading.Thread(target=fft, name="fft", daemon=True).start()
    time.sleep(0.5)  # numpy imported and running
    print("ready", flush=True)
    threading.Event().wait()
else:
    sys.exit(f"unknown mode {mode}")
