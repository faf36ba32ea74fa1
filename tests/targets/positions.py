"""Thread "comprehension" sleeps in a call inside a list comprehension split over several lines: the
call's line and column range are known from `dis` (3.11+). The main thread waits in main_wait."""
import threading
import time

started = threading.Event()


def comprehension(n):
    started.set()
    return [
        time.sleep(  # LINE:call
            3600
        )
        for _ in range(n)
    ]


def main_wait():
    print("ready", flush=True)
    threading.Event().wait()


threading.Thread(target=comprehension, args=(1,), name="comprehension", daemon=True).start()
started.wait()
time.sleep(0.2)
main_wait()
