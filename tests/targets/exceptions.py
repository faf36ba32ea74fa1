"""Threads handling an exception and threads not: "in-except" works a little and sleeps, over and
over, inside `except ValueError`, "in-finally" inside a `finally` run by a propagating KeyError,
"in-generator" inside an `except` in a generator (an idle wait is idle, not error handling: the work
is what shows as time in error paths); "looping" loops (sleeping briefly) after having handled and
left an exception, and "plain" sleeps without ever raising. The main thread waits in main_wait."""
import threading
import time

# A tenth of each handling thread's time at work, so three of them cost little CPU.
BUSY_S = 0.002
NAP_S = 0.018

ready = threading.Barrier(6)


class AppError(Exception):
    pass


def in_except():
    try:
        raise ValueError("bad")
    except ValueError:
        ready.wait()
        while True:
            deadline = time.perf_counter() + BUSY_S
            while time.perf_counter() < deadline:  # LINE:except
                pass
            time.sleep(NAP_S)


def in_finally():
    try:
        try:
            raise KeyError("k")
        finally:
            ready.wait()
            while True:
                deadline = time.perf_counter() + BUSY_S
                while time.perf_counter() < deadline:  # LINE:finally
                    pass
                time.sleep(NAP_S)
    except KeyError:
        pass


def gen():
    try:
        raise AppError()
    except AppError:
        ready.wait()
        while True:
            deadline = time.perf_counter() + BUSY_S
            while time.perf_counter() < deadline:
                pass
            time.sleep(NAP_S)
            yield


def in_generator():
    for _ in gen():
        pass


def looping():
    try:
        raise ValueError("handled and gone")
    except ValueError:
        pass
    ready.wait()
    while True:
        time.sleep(0.05)  # LINE:looping


def plain():
    ready.wait()
    while True:
        time.sleep(3600)


for target, name in ((in_except, "in-except"), (in_finally, "in-finally"), (in_generator, "in-generator"),
                     (looping, "looping"), (plain, "plain")):
    threading.Thread(target=target, name=name, daemon=True).start()
ready.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
