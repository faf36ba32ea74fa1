"""One thread blocked for ever on a threading.Lock another thread holds: idle in futex, not waiting for the GIL."""
import threading
import time

lock = threading.Lock()
lock.acquire()


def block_forever(started):
    started.set()
    lock.acquire()  # LINE:acquire


started = threading.Event()
threading.Thread(target=block_forever, args=(started,), name="lock-waiter", daemon=True).start()
started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
