"""Runs for about 1.5 s (or argv[1] seconds): a spinner thread and the main thread asleep; then exits 0."""
import sys
import threading
import time

RUN_S = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5


def spin(deadline):
    x = 0
    while time.monotonic() < deadline:
        x += 1


deadline = time.monotonic() + RUN_S
worker = threading.Thread(target=spin, args=(deadline,), name="short-spinner")
worker.start()
print("ready", flush=True)
time.sleep(RUN_S)
worker.join()
