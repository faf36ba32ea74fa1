"""Thread states as the native sampler encodes them (see docs/states.md).

Kept apart from gilty.sampling.session so that light commands (`gilty dump`) can name states without
importing the recording machinery.
"""

HOLDING_GIL = 0
GC = 1
WAITING_GIL = 2
NATIVE = 3
IDLE = 4
UNKNOWN = 5
CPU_WAIT = 6  # runnable, waiting for a CPU (host saturated or cgroup quota spent)
STATE_NAMES = ("holding_gil", "gc", "waiting_gil", "native", "idle", "unknown", "cpu_wait")
