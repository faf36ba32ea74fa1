"""A thread "worker" that runs steady() for 4 ms of every 20 ms and sleeps the rest; with the argument
"extra" it also runs extra_work() for 4 ms each period. Two recordings, with and without, differ by
one known function (the differential flame graph's test)."""
import sys
import threading
import time

EXTRA = len(sys.argv) > 1 and sys.argv[1] == "extra"
PERIOD_S = 0.02
SLICE_S = 0.004


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def steady():
    spin(SLICE_S)


def extra_work():
    spin(SLICE_S)


def work():
    while True:
        steady()
        if EXTRA:
            extra_work()
        time.sleep(PERIOD_S - SLICE_S * (2 if EXTRA else 1))


threading.Thread(target=work, name="worker", daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
