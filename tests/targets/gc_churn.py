"""One thread making self-referencing lists as fast as it can; the cyclic GC (default thresholds) collects them."""
import gc
import threading
import time

# A live population the collector has to traverse, so that its passes are long enough to be sampled.
KEEP = [[i] for i in range(200_000)]


def churn_forever(started):
    started.set()
    while True:
        a = []
        a.append(a)  # LINE:churn


assert gc.isenabled()
started = threading.Event()
threading.Thread(target=churn_forever, args=(started,), name="gc-churner", daemon=True).start()
started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
