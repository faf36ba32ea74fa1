"""Seed, Experiment 1: two I/O-bound threads doing short blocking calls, no CPU-bound thread."""
import threading
import time


def io_work():
    while True:
        time.sleep(0.01)


io1 = threading.Thread(name="io1", target=io_work, daemon=True)
io2 = threading.Thread(name="io2", target=io_work, daemon=True)
io1.start()
io2.start()
print("ready", flush=True)
threading.Event().wait()
