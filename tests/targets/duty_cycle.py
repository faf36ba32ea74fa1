"""A thread "worker" that runs Python for BUSY of every 20 ms and sleeps the rest. Usage: BUSY (0..1)."""
import sys
import threading
import time

BUSY = float(sys.argv[1])
PERIOD_S = 0.02


def work():
    while True:
        end = time.perf_counter() + BUSY * PERIOD_S
        while time.perf_counter() < end:
            pass
        time.sleep((1 - BUSY) * PERIOD_S)


threading.Thread(target=work, name="worker", daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
