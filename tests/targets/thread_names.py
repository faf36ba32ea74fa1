"""Threads whose names use every PyUnicode storage kind: ASCII, Latin-1, UCS-2 and UCS-4."""
import threading
import time

NAMES = ["plain-ascii", "wörker-é", "線程", "snake-🐍"]


def park(started):
    started.set()
    while True:
        time.sleep(3600)  # LINE:park


events = []
for name in NAMES:
    started = threading.Event()
    threading.Thread(target=park, args=(started,), name=name, daemon=True).start()
    events.append(started)
for started in events:
    started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
