"""Trace target for gilty-trace's tests.

usage: target.py MARKER [SWITCH_INTERVAL_S] [LIFETIME_S] [WORKLOAD]

Starts two CPU-spinning threads and one thread that makes reference cycles and calls gc.collect() every
50 ms (printing "gc <result>"), then prints "ready <pid>". When the file MARKER appears (or after 0.5 s
once "ready" is printed and no marker test is wanted: MARKER == "-"), it starts a third spinner ("late <tid>")
and a thread that runs for 0.1 s and exits ("short <tid>", then "short_done"). Every 0.25 s it prints
"rate <spinner iterations per second>". Exits after LIFETIME_S seconds. WORKLOAD "yield" makes the two
workers call os.sched_yield() in a loop instead (each call releases and retakes the GIL; time.sleep(0) would
sleep for the timer slack); "yield_single" starts only one such worker (the GIL is never contended: the cost
of the probes themselves shows).
"""
import gc
import os
import sys
import threading
import time

marker = sys.argv[1]
if len(sys.argv) > 2 and float(sys.argv[2]) > 0:
    sys.setswitchinterval(float(sys.argv[2]))
lifetime = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
workload = sys.argv[4] if len(sys.argv) > 4 else "spin"
counts = [0, 0, 0]
lock = threading.Lock()


def say(*a):
    with lock:
        print(*a, flush=True)


def spin(slot):
    n = 0
    while True:
        n += 1
        if n & 0x3FF == 0:
            counts[slot] += 1024


def yielder(slot):
    n = 0
    while True:
        os.sched_yield()
        n += 1
        if n & 0x3FF == 0:
            counts[slot] += 1024


def collector():
    while True:
        junk = []
        for _ in range(100):
            a = []
            a.append(a)  # a reference cycle only the collector can free
            junk.append(a)
        del junk, a
        say("gc", gc.collect())
        time.sleep(0.05)


def short():
    say("short", threading.get_native_id())
    end = time.monotonic() + 0.1
    while time.monotonic() < end:
        pass
    say("short_done")


work = yielder if workload.startswith("yield") else spin
threading.Thread(target=work, args=(0,), daemon=True, name="spin0").start()
if workload != "yield_single":
    threading.Thread(target=work, args=(1,), daemon=True, name="spin1").start()
threading.Thread(target=collector, daemon=True, name="gc").start()
say("ready", os.getpid())

start = time.monotonic()
late_started = False
last_rate = time.monotonic()
last_count = 0
while time.monotonic() - start < lifetime:
    if not late_started and (os.path.exists(marker) or (marker == "-" and time.monotonic() - start > 0.5)):
        late_started = True

        def late():
            say("late", threading.get_native_id())
            spin(2)

        threading.Thread(target=late, daemon=True, name="late").start()
        threading.Thread(target=short, daemon=True, name="short").start()
    now = time.monotonic()
    if now - last_rate >= 0.25:
        total = sum(counts)
        say("rate", int((total - last_count) / (now - last_rate)))
        last_rate, last_count = now, total
    time.sleep(0.01)
os._exit(0)
