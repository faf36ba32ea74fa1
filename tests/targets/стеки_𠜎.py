"""A file name with Cyrillic and 4-byte (CJK Extension B) characters, and functions named in each."""
import threading
import time


def функция_стека(started):
    started.set()
    while True:
        time.sleep(3600)  # LINE:cyrillic


def 函数_𠜎𠀋(started):
    started.set()
    while True:
        time.sleep(3600)  # LINE:astral


events = []
for name, target in (("cyrillic", функция_стека), ("astral", 函数_𠜎𠀋)):
    started = threading.Event()
    threading.Thread(target=target, args=(started,), name=name, daemon=True).start()
    events.append(started)
for started in events:
    started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
