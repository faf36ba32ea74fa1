"""Imports the builds of tests/targets/gil_modules/gil_modules.c named in argv[2:] (gil_free,
gil_needed, gil_single, and on 3.15 gil_export) from the directory argv[1], then waits."""

import importlib
import sys
import threading

sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    assert importlib.import_module(name).answer() == 42
print("ready", flush=True)
threading.Event().wait()
