"""What every framework app's handler does: a few milliseconds of the thread's own CPU in Python, so
that each request is seen in the handler whatever else runs on the host."""

import os
import time

WORK_S = float(os.environ.get("FRAMEWORK_WORK_MS", "8")) / 1000


def work() -> str:
    start = time.thread_time()
    total = 0
    while time.thread_time() - start < WORK_S:
        total += sum(range(300))
    return f"ok {total}\n"
