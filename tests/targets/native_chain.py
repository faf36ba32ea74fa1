"""A thread "spinner" calling the test's C extension (outer -> middle -> inner_spin) in a loop.

argv: the directory holding the built native_chain extension, and "release" or "hold" (the GIL in
inner_spin). The main thread sleeps. Prints "ready" once the spinner has made its first call."""

import sys
import threading
import time

sys.path.insert(0, sys.argv[1])
import native_chain  # noqa: E402

RELEASE = sys.argv[2] == "release"
started = threading.Event()


def spin():
    while True:
        started.set()
        # ~33 ms a call: the dump's same-moment check can be fooled by a thread that loops back to
        # the same instruction within its 0.4 ms bracket (docs/cli.md, native stacks).
        native_chain.outer(30_000_000, RELEASE)  # LINE:call


threading.Thread(target=spin, name="spinner", daemon=True).start()
started.wait()
print("ready", flush=True)
while True:
    time.sleep(1)  # LINE:sleep
