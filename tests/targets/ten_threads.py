"""Ten named threads, each parked in wait_here()."""
import threading
import time


def wait_here(started):
    started.set()
    while True:
        time.sleep(3600)  # LINE:wait_here


events = []
for i in range(10):
    started = threading.Event()
    threading.Thread(target=wait_here, args=(started,), name=f"named-{i}", daemon=True).start()
    events.append(started)
for started in events:
    started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
