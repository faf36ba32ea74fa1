"""The main thread creates objects whose `__init__` runs a loop, over and over.

3.13 specialises `Foo(...)` into CALL_ALLOC_AND_ENTER_INIT, which pushes an interpreter-owned shim
frame (code `__init__` in file `__init__`) between the caller and `Foo.__init__`; tracebacks leave it
out, and so must a sampled stack.
"""


class Foo:
    def __init__(self, n):
        total = 0
        for i in range(n):  # LINE:init_loop
            total += i
        self.total = total


def make():
    while True:
        Foo(2000)  # LINE:make


print("ready", flush=True)
make()
