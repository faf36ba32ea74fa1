"""gunicorn config for the sidecar soak: before each fork the master runs a short-lived thread of
its own (as a master-side hook or exporter might), so the master's threads end all the time too."""

import threading
import time


def _briefly_busy():
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:
        pass


def pre_fork(server, worker):
    t = threading.Thread(target=_briefly_busy, name="master-hook")
    t.start()
    t.join()
