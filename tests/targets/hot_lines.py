"""Known hot lines for the HTML source view: 'sorter' spends most of its time in one C call on one
line (holding the GIL there), 'spinner' runs a pure-Python loop and so waits for the GIL sorter
holds, mostly at its loop's body or head."""

import threading

DATA = list(range(200_000, 0, -1))


def sort_forever():
    rounds = 0
    while True:
        rounds += 1  # LINE:sort_count
        ordered = sorted(DATA)  # LINE:sort_call
        del ordered


def spin_forever():
    x = 0
    while True:  # LINE:spin_head
        x += 1  # LINE:spin_body


for name, target in (("sorter", sort_forever), ("spinner", spin_forever)):
    threading.Thread(target=target, name=name, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
