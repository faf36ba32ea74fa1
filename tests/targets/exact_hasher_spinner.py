"""A native-code thread beside a CPU spinner.

"hasher" runs hashlib.sha256 over a 32 MiB buffer in a loop (the GIL is released while it hashes, then
retaken for each call's Python part); "spinner" is a pure-Python busy loop that holds the GIL the rest
of the time.
"""
import hashlib
import threading
import time

DATA = b"\x5a" * (32 << 20)


def hash_forever():
    while True:
        hashlib.sha256(DATA).digest()  # LINE:hash


def spin_forever():
    x = 0
    while True:  # LINE:spin
        x += 1


threading.Thread(target=hash_forever, name="hasher", daemon=True).start()
threading.Thread(target=spin_forever, name="spinner", daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
