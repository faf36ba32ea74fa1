"""One thread hashing a 64 MiB buffer with hashlib.sha256 in a loop: native code with the GIL released."""
import hashlib
import threading
import time

DATA = b"\x5a" * (64 << 20)


def hash_forever(started):
    started.set()
    while True:
        hashlib.sha256(DATA).digest()  # LINE:hash


started = threading.Event()
threading.Thread(target=hash_forever, args=(started,), name="hasher", daemon=True).start()
started.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
