"""Imports the builds of tests/targets/gil_modules/gil_modules.c named in argv[2:] (gil_free,
gil_needed, gil_single, and on 3.15 gil_export) from the directory argv[1], then waits; with
"spin" among them, two threads spin in spin_forever() meanwhile (a CPU-bound program that a
free-threaded build would speed up, were it not for the modules)."""
import importlib
import sys
import threading


def spin_forever():
    x = 0
    while True:
        x += 1


sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    if name == "spin":
        for i in (1, 2):
            threading.Thread(target=spin_forever, name=f"spinner-{i}", daemon=True).start()
        continue
    assert importlib.import_module(name).answer() == 42
print("ready", flush=True)
threading.Event().wait()
