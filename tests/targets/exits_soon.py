"""Runs for about 1.5 s (or argv[1] seconds): a spinner thread and the main thread asleep; then exits 0.

SIGUSR1 cuts the run short: it then ends argv[2] seconds (1 s if not given) after the signal. A test
sends it once gilty says it records, so the target outlives gilty's start-up however slow that is and
is still recorded for those seconds before it exits.
"""
import signal
import sys
import threading
import time

RUN_S = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
LEFT_S = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0


class EndSoon(Exception):
    pass


def end_soon(signum, frame):
    raise EndSoon


def spin(deadline):
    x = 0
    while time.monotonic() < deadline[0]:
        x += 1


deadline = [time.monotonic() + RUN_S]
signal.signal(signal.SIGUSR1, end_soon)
worker = threading.Thread(target=spin, args=(deadline,), name="short-spinner")
worker.start()
print("ready", flush=True)
try:
    time.sleep(RUN_S)
except EndSoon:
    deadline[0] = time.monotonic() + LEFT_S
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    time.sleep(LEFT_S)
worker.join()
