"""40 named threads (worker-00 .. worker-39), each waiting on an Event, plus the main thread."""
import threading
import time

COUNT = 40


def wait_forever(started, stop):
    started.set()
    stop.wait()  # LINE:wait


stop = threading.Event()
events = []
for i in range(COUNT):
    started = threading.Event()
    threading.Thread(target=wait_forever, args=(started, stop), name=f"worker-{i:02d}", daemon=True).start()
    events.append(started)
for started in events:
    started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
