"""Seven threads: the main thread, two CPU spinners and four threads sleeping 10 ms in a loop (GIL traffic
on every wake-up). Prints "ready" once they all run."""
import threading
import time


def spin():
    while True:
        pass


def nap():
    while True:
        time.sleep(0.01)


for i, fn in enumerate([spin, spin, nap, nap, nap, nap]):
    threading.Thread(target=fn, name=f"{fn.__name__}-{i}", daemon=True).start()
time.sleep(0.1)
print("ready", flush=True)
threading.Event().wait()
