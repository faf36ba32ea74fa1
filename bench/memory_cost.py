"""What `gilty memory` costs: one measurement pass per process size, and the target's throughput.

    .venv/bin/python bench/memory_cost.py [--python PATH] [--sizes 100,1024] [--repeats 9]
                                          [--rounds 3] [--window 4] [--nice N] [--json FILE]

1. Cost of one pass. For each size S in --sizes (MiB), a target (--python, default pyenv 3.12.1)
   builds about S MiB of Python objects (dicts, lists, strings), runs gc.collect(), and forks one
   worker. `_native.measure_once(worker)` then times, --repeats times, each part of a pass:
   /proc/PID/stat, smaps_rollup, /proc/PID/maps, the GC state read, the pagemap baseline and one
   pagemap rescan. Reported: medians, and the worker's RSS.

2. Overhead on the target. The worker of the smallest size loops over its records (reading every
   field: reference-count writes, as a request handler does) and reports its iterations per
   0.5 s. Each round measures --window seconds without gilty and --window seconds with a
   `MemoryMonitor` on the tree (1 s passes, GC flag every 1 ms), in alternating order. Reported:
   median and range of (with / without), and gilty's CPU share (both of its threads).

--nice N (e.g. -10 on a shared machine) runs the benchmark, its targets and gilty in a session
and scheduling autogroup of their own at that nice value, as bench/overhead.py does.

Needs permission to read the target (same user or root).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
import signal
import statistics
import subprocess
import sys
import time

DEFAULT_PYTHON = os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3")

# ~575 bytes of RSS per record on 3.12 (dict + lists + strings + floats).
TARGET = r"""
import gc, os, sys, time
mib = int(sys.argv[1])
n = mib * 1024 * 1024 // 575
data = [{"id": i, "name": "user-%d" % i, "tags": ["t%d" % (i % 97), "x"], "score": i * 0.5, "h": [i, i + 1]}
        for i in range(n)]
gc.collect()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.read(r, 1)  # wait for "go"
    chunk = data[: max(1, len(data) // 8)]
    t_next = time.monotonic() + 0.5
    count = 0
    while True:
        for rec in chunk:
            for v in rec.values():
                count += 1 if v else 0
        now = time.monotonic()
        if now >= t_next:
            os.write(1, b"tick %d\n" % count)
            count = 0
            t_next += 0.5
print("ready %d" % pid, flush=True)
sys.stdin.readline()
os.write(w, b"g")
sys.stdin.readline()
os.kill(pid, 9)
"""


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        raise RuntimeError("target did not answer in time")
    return proc.stdout.readline().decode().strip()


def start_target(python: str, mib: int) -> tuple:
    proc = subprocess.Popen([python, "-c", TARGET, str(mib)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = read_line(proc, 300)
    assert line.startswith("ready "), line
    return proc, int(line.split()[1])


def stop_target(proc: subprocess.Popen, worker: int) -> None:
    for pid in (worker, proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def pass_cost(native, python: str, mib: int, repeats: int) -> dict:
    proc, worker = start_target(python, mib)
    try:
        runs = [native.measure_once(worker) for _ in range(repeats)]
        master = [native.measure_once(proc.pid) for _ in range(3)]
    finally:
        stop_target(proc, worker)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    med["master_smaps_s"] = statistics.median(r["smaps_s"] for r in master)
    return med


def throughput(proc: subprocess.Popen, seconds: float) -> float:
    """Iterations per second reported by the worker over ``seconds`` (whole ticks)."""
    end = time.monotonic() + seconds
    ticks = []
    while time.monotonic() < end:
        line = read_line(proc, 5)
        if line.startswith("tick "):
            ticks.append(int(line.split()[1]))
    return sum(ticks) / (0.5 * len(ticks)) if ticks else 0.0


def overhead(native, python: str, mib: int, rounds: int, window: float) -> dict:
    proc, worker = start_target(python, mib)
    ratios, cpu_shares, per_pass = [], [], []
    try:
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        throughput(proc, 1.5)  # warm up: the first reads copy the pages
        for r in range(rounds):
            order = ("without", "with") if r % 2 == 0 else ("with", "without")
            got = {}
            for mode in order:
                if mode == "with":
                    mon = native.MemoryMonitor(proc.pid, interval_s=1.0, gc_poll_s=0.001)
                    time.sleep(0.3)
                    got[mode] = throughput(proc, window)
                    stats = mon.stop()
                    batch = mon.collect(0.0)
                    cpu = stats["measuring_cpu_s"] + stats["gc_poll"]["cpu_s"]
                    cpu_shares.append(cpu / stats["elapsed_s"])
                    per_pass.extend(
                        s["cost"]["stat_s"] + s["cost"]["smaps_s"] + s["cost"]["gc_s"] + s["cost"]["pagemap_s"]
                        for s in batch["samples"]
                    )
                else:
                    got[mode] = throughput(proc, window)
            ratios.append(got["with"] / got["without"] - 1.0)
    finally:
        stop_target(proc, worker)
    return {
        "slowdown_median": statistics.median(ratios),
        "slowdown_min": min(ratios),
        "slowdown_max": max(ratios),
        "gilty_cpu_share_median": statistics.median(cpu_shares),
        "per_process_pass_median_s": statistics.median(per_pass) if per_pass else None,
    }


def set_nice(value: int) -> None:
    """Own session (so its own autogroup, when autogroup scheduling is on), then that nice value."""
    try:
        os.setsid()
    except OSError:
        pass
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(value))
    except OSError:
        pass
    os.setpriority(os.PRIO_PROCESS, 0, value)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=DEFAULT_PYTHON)
    ap.add_argument("--sizes", default="100,1024", help="heap sizes in MiB (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window", type=float, default=4.0)
    ap.add_argument("--nice", type=int)
    ap.add_argument("--json", dest="json_path")
    args = ap.parse_args()
    if args.nice is not None:
        set_nice(args.nice)
    from gilty import _native as native

    sizes = [int(s) for s in args.sizes.split(",")]
    result = {"machine": platform.platform(), "cpus": os.cpu_count(), "python": args.python, "passes": {}}
    print(f"target {args.python}; {os.cpu_count()} CPUs; {platform.platform()}")
    print(
        f"{'heap':>6} {'RSS MiB':>8} {'stat':>8} {'smaps':>8} {'maps':>8} {'gc':>8} {'pm base':>8} {'pm scan':>8}  (ms, medians)"
    )
    for mib in sizes:
        c = pass_cost(native, args.python, mib, args.repeats)
        result["passes"][mib] = c
        ms = lambda k: f"{c[k] * 1e3:8.2f}"  # noqa: E731, B023 - used within its iteration
        print(
            f"{mib:>5}M {c['rss'] / 2**20:8.0f} {ms('stat_s')} {ms('smaps_s')} {ms('maps_s')} {ms('gc_s')} "
            f"{ms('pagemap_baseline_s')} {ms('pagemap_scan_s')}"
        )
    o = overhead(native, args.python, min(sizes), args.rounds, args.window)
    o["rounds"], o["window_s"], o["nice"] = args.rounds, args.window, args.nice
    result["overhead"] = o
    print(
        f"throughput of a worker reading its objects, with vs without gilty memory: "
        f"{o['slowdown_median'] * 100:+.1f}% median ({o['slowdown_min'] * 100:+.1f} .. {o['slowdown_max'] * 100:+.1f}); "
        f"gilty used {o['gilty_cpu_share_median'] * 100:.1f}% of a CPU"
    )
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
