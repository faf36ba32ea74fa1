"""Target for tests/thread_names.rs: starts named threads, prints a JSON map ident -> name, then "ready".

With --bare it imports no threading itself and prints {} unless something else already imported it.
"""
import json
import sys
import time

if "--bare" in sys.argv:
    if "threading" in sys.modules:
        t = sys.modules["threading"]
        names = {str(th.ident): th.name for th in t.enumerate()}
    else:
        names = {}
    print(json.dumps(names, ensure_ascii=False), flush=True)
    print("ready", flush=True)
    time.sleep(600)
    sys.exit(0)

import _thread
import threading

stop = threading.Event()
entered = threading.Semaphore(0)


def park():
    entered.release()
    stop.wait()


class Custom(threading.Thread):
    def __init__(self):
        super().__init__(name="custom-subclass", daemon=True)
        self.extra = 1

    def run(self):
        park()


class ManyAttrs(threading.Thread):
    """Enough attributes to leave shared-key/inline-values storage for a real dict."""

    def __init__(self):
        for i in range(40):
            setattr(self, f"attr_{i}", i)
        super().__init__(name="many-attrs", daemon=True)

    def run(self):
        park()


threads = [
    threading.Thread(target=park, name="worker-α", daemon=True),
    threading.Thread(target=park, name="io-1", daemon=True),
    threading.Thread(target=park, name="名前-wide", daemon=True),
    threading.Thread(target=park, name="emoji-🧵", daemon=True),
    Custom(),
    ManyAttrs(),
]
threads += [threading.Thread(target=park, name=f"many-{n}", daemon=True) for n in range(40)]
with_dict = threading.Thread(target=park, name="has-__dict__", daemon=True)
with_dict.__dict__  # materializes the instance dict (3.12: dict instead of values; 3.13: dict over inline values)
threads.append(with_dict)
deleted = threading.Thread(target=park, name="deleted-attr", daemon=True)
deleted.tmp = 1
del deleted.tmp  # 3.10: split instance dict becomes combined; 3.11+: a NULL slot in the values
threads.append(deleted)
renamed = threading.Thread(target=park, name="before-rename", daemon=True)
threads.append(renamed)

for t in threads:
    t.start()
renamed.name = "after-rename"


def dummy():
    threading.current_thread()  # registers a _DummyThread ("Dummy-N") in threading._active
    park()


_thread.start_new_thread(dummy, ())
for _ in range(len(threads) + 1):
    entered.acquire()

names = {str(t.ident): t.name for t in threading.enumerate()}
print(json.dumps(names, ensure_ascii=False), flush=True)
print("ready", flush=True)
time.sleep(600)
