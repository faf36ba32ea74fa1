"""Spends its last second in interpreter shutdown, after threading has left sys.modules (a slow __del__)."""
import sys
import threading
import time
import types


class SlowToDie:
    def __del__(self, sleep=time.sleep):
        sleep(1.0)


late = types.ModuleType("zz_late")  # registered after threading: removed from sys.modules after it
late.keep = SlowToDie()
sys.modules["zz_late"] = late
del late
print("ready", flush=True)
time.sleep(0.5)
