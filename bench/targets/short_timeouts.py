"""Two threads that block with short timeouts, as an event loop and a pool's idle worker do: the
main thread selects for 0.5 ms then runs ~30 us of Python; `parked` waits on a condition for 2 ms
at a time. Both spend almost all their time blocked. Used by bench/on_cpu_truth.py."""

import selectors
import socket
import threading


def parked():
    cond = threading.Condition()
    with cond:
        while True:
            cond.wait(0.002)


threading.Thread(target=parked, name="parked", daemon=True).start()
a, b = socket.socketpair()
sel = selectors.DefaultSelector()
sel.register(a, selectors.EVENT_READ)
while True:
    sel.select(0.0005)
    sum(range(3000))
