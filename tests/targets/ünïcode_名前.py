"""A script with a non-ASCII file name, a Cyrillic function name and non-ASCII thread names."""
import threading
import time


def функция(started):
    started.set()
    while True:
        time.sleep(3600)  # LINE:функция


events = []
for name in ("wörker-é", "線程"):
    started = threading.Event()
    threading.Thread(target=функция, args=(started,), name=name, daemon=True).start()
    events.append(started)
for started in events:
    started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
