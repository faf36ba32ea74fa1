"""One thread asleep in time.sleep() for ever: idle in clock_nanosleep (select on 3.10)."""
import threading
import time


def sleep_forever(started):
    started.set()
    while True:
        time.sleep(3600)  # LINE:sleep


started = threading.Event()
threading.Thread(target=sleep_forever, args=(started,), name="sleeper", daemon=True).start()
started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
