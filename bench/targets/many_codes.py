"""Benchmark target for `gilty specialization`'s cost: N (default 2,000) distinct functions, each with
attribute, global, arithmetic and call sites, called round-robin by one thread; measures its own
throughput.

Protocol (stdin/stdout, one line each):
  target prints   "ready <pid>"        once every function has run (warm, specialized)
  driver writes   "window S"           the target counts calls for S seconds
  target prints   {"calls": ..., "window_s": ..., "cps": ..., "cpu_s": ...}
  driver writes   "quit"
"""

import json
import os
import sys
import threading
import time


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


SCALE = 3
TEMPLATE = """
def f{i}(p, items):
    total = p.x * SCALE + p.y
    for v in items:
        total += v
    return total + len(items) + {i}
"""

calls = 0
stop = False


def main():
    global calls
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ns = {"SCALE": SCALE}
    for i in range(n):
        exec(TEMPLATE.format(i=i), ns)
    funcs = [ns[f"f{i}"] for i in range(n)]
    p, items = Point(1, 2), [1, 2, 3]
    for f in funcs:
        for _ in range(3):
            f(p, items)

    def run():
        global calls
        while not stop:
            for f in funcs:
                f(p, items)
            calls += len(funcs)

    threading.Thread(target=run, daemon=True).start()
    print(f"ready {os.getpid()}", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        window = float(cmd[1])
        c0, t0, cpu0 = calls, time.monotonic(), time.process_time()
        time.sleep(window)
        c1, t1, cpu1 = calls, time.monotonic(), time.process_time()
        print(json.dumps({"calls": c1 - c0, "window_s": t1 - t0, "cps": (c1 - c0) / (t1 - t0), "cpu_s": cpu1 - cpu0}), flush=True)


if __name__ == "__main__":
    main()
