"""A GIL-held hang: the main thread calls pause() through ctypes.PyDLL, which keeps the GIL across the
call, so it never returns and thread "starved" waits for the GIL for ever. Prints "ready" just before."""

import ctypes
import threading

libc = ctypes.PyDLL(None)
started = threading.Event()


def starved():
    started.set()
    n = 0
    while True:
        n += 1  # LINE:starved


def hang():
    print("ready", flush=True)
    libc.pause()  # LINE:pause


threading.Thread(target=starved, name="starved", daemon=True).start()
started.wait()
hang()
