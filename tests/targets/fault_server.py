"""A preloaded fork server for `gilty memory --faults`: the master builds two shared heaps, forks
FAULT_WORKERS workers and waits; on a line on its stdin each worker runs two phases, each copying
the pages of one heap, and reports what the kernel counted for each.

- ``touch_prices``: reads every float of ``PRICES`` (reference-count writes on untracked objects,
  which no collection visits);
- ``collect_all``: one full ``gc.collect()``, which writes the GC header of every tracked container
  (the lists of ``BASKETS``, never touched by the first phase).

Each worker reads its own Private_Dirty (/proc/self/smaps_rollup) before, between and after the
phases and prints one JSON line: {"pid", "touch_bytes", "collect_bytes", "touch_s", "touch_cpu_s"}
(the first phase's wall and CPU time, kernel time included). Set
FAULT_SKIP_COLLECT=1 to run the first phase alone (the cost measurement). Sizes: FAULT_FLOATS,
FAULT_LISTS.
"""

import gc
import json
import os
import sys
import time

WORKERS = int(os.environ.get("FAULT_WORKERS", "2"))
FLOATS = int(os.environ.get("FAULT_FLOATS", "600000"))
LISTS = int(os.environ.get("FAULT_LISTS", "200000"))
SKIP_COLLECT = os.environ.get("FAULT_SKIP_COLLECT") == "1"

PRICES = {"p%d" % i: i * 0.25 + 0.1 for i in range(FLOATS)}
BASKETS = [[None] for _ in range(LISTS)]
gc.collect()
gc.disable()  # no collection but the one asked for


def private_dirty():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) * 1024
    return 0


def touch_prices():
    total = 0.0
    for v in PRICES.values():
        # A little work per object, as a request handler does: faults are then spread over time.
        total += (v * 1.0001 - v) * 0.5 + (v if v > 1e12 else 0.0)
    return total


def collect_all():
    return gc.collect()


def worker(go, out):
    os.read(go, 1)
    before = private_dirty()
    t0, c0 = time.perf_counter(), time.process_time()
    touch_prices()
    touch_s, touch_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    between = private_dirty()
    time.sleep(0.1)
    between = min(between, private_dirty())
    if not SKIP_COLLECT:
        collect_all()
    after = private_dirty()
    line = json.dumps(
        {
            "pid": os.getpid(),
            "touch_bytes": between - before,
            "collect_bytes": after - between,
            "touch_s": touch_s,
            "touch_cpu_s": touch_cpu_s,
        }
    )
    os.write(out, (line + "\n").encode())
    os.read(go, 1)  # until the master closes the pipe
    os._exit(0)


def main():
    results_r, results_w = os.pipe()
    gos = []
    pids = []
    for _ in range(WORKERS):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.close(results_r)
            worker(r, results_w)
        os.close(r)
        gos.append(w)
        pids.append(pid)
    os.close(results_w)
    print("pids", os.getpid(), *pids, flush=True)
    if not sys.stdin.readline():
        return
    for w in gos:
        os.write(w, b"g")
    results = os.fdopen(results_r)
    for _ in pids:
        print(results.readline().strip(), flush=True)
    sys.stdin.readline()
    for w in gos:
        os.close(w)
    for pid in pids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
