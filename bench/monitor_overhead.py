"""What the in-process monitor costs a CPU-bound workload, beside no monitor, in one interleaved run.

    .venv/bin/python bench/monitor_overhead.py [--rounds 7] [--seconds 3] [--threads 4] [--interval 0.001]

Each round runs the workload (N threads counting in a pure-Python loop) once without the monitor and
once with `gilty.observe.monitor.start(interval)`, in alternating order, each in a fresh interpreter. Reported:
the median throughput ratio (with / without), its spread, and the monitor thread's own CPU per second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.path.join(os.path.dirname(HERE), ".venv", "bin", "python")

WORKLOAD = r"""
import json, sys, threading, time
seconds, threads, interval = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if interval > 0:
    import gilty.observe.monitor
    gilty.observe.monitor.start(interval)
    time.sleep(0.2)
counts = [0] * threads
stop = False
def work(i):
    n = 0
    while not stop:
        n += 1
    counts[i] = n
ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
t0 = time.perf_counter()
for t in ts: t.start()
time.sleep(seconds)
stop = True
for t in ts: t.join()
wall = time.perf_counter() - t0
out = {"ips": sum(counts) / wall}
if interval > 0:
    import gilty
    s = gilty.gil_stats()
    out["monitor_cpu_per_s"] = s["monitor_cpu_s"] / s["elapsed_s"]
    out["passes_per_s"] = s["passes"] / s["elapsed_s"]
print(json.dumps(out))
"""


def run(seconds: float, threads: int, interval: float) -> dict:
    done = subprocess.run(
        [PYTHON, "-c", WORKLOAD, str(seconds), str(threads), str(interval)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--interval", type=float, default=0.001)
    a = p.parse_args()
    ratios, cpu, passes = [], [], []
    for r in range(a.rounds):
        order = (0.0, a.interval) if r % 2 == 0 else (a.interval, 0.0)
        res = {iv: run(a.seconds, a.threads, iv) for iv in order}
        ratios.append(res[a.interval]["ips"] / res[0.0]["ips"])
        cpu.append(res[a.interval]["monitor_cpu_per_s"])
        passes.append(res[a.interval]["passes_per_s"])
        print(f"round {r + 1}: ratio {ratios[-1]:.3f}, monitor CPU {cpu[-1]:.3f} s/s, {passes[-1]:.0f} passes/s", file=sys.stderr)
    print(
        f"{a.threads} CPU-bound threads, monitor every {a.interval * 1000:g} ms, {a.rounds} rounds of {a.seconds:g} s: "
        f"throughput with/without median {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]; "
        f"monitor CPU median {statistics.median(cpu):.3f} s per s; {statistics.median(passes):.0f} passes/s"
    )


if __name__ == "__main__":
    main()
