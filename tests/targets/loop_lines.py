"""Four threads spinning in loops, so the GIL is contended and threads are sampled on every instruction.

The `for` loop with an `if` body makes 3.10 and 3.11 compile its backward jump without a line number
(JUMP_ABSOLUTE / JUMP_BACKWARD with no location entry); `while` loops get one on every version.
"""
import itertools
import threading


def spin_while():
    x = 0
    while True:  # LINE:while_head
        x += 1  # LINE:while_body


def spin_for():
    n = 0
    for i in itertools.count():  # LINE:for_head
        if i & 1:  # LINE:for_test
            n += 1  # LINE:for_body


for name, target in (("while-1", spin_while), ("while-2", spin_while), ("for-1", spin_for), ("for-2", spin_for)):
    threading.Thread(target=target, name=name, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
