"""gilty's on-CPU states against the kernel's CPU time for the same threads over the same run.

A thread's samples in `holding_gil`, `gc` and `native` say it was on a CPU; their share cannot
exceed the share of the run the kernel gave it a CPU (`/proc/PID/task/TID/schedstat`, read when
gilty says it is recording and when it has exited). Likewise everything runnable (those states
plus `cpu_wait`) against CPU time plus run-queue delay. Each run records twice: with the sampler's
real-time priority (the default where permitted) and without it (GILTY_NO_REALTIME=1). The target (bench/targets/short_timeouts.py)
has two threads that block with short timeouts.

    .venv/bin/python bench/on_cpu_truth.py --python /root/.pyenv/versions/3.12.1/bin/python3 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GILTY = [str(Path(sys.executable).parent / "gilty")]


def schedstat(pid: int) -> dict:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            run, delay, _ = map(int, Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split())
        except (OSError, ValueError):
            continue
        out[int(tid)] = (run, delay)
    return out


def one_run(python: str, seconds: float, rate: int, realtime: bool) -> list:
    target = subprocess.Popen([python, str(HERE / "targets" / "short_timeouts.py")], stdin=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            g = subprocess.Popen(
                GILTY
                + [
                    "record",
                    "--pid",
                    str(target.pid),
                    "--duration",
                    str(seconds),
                    "--rate",
                    str(rate),
                    "--format",
                    "json",
                    "-o",
                    out.name,
                ],
                stderr=subprocess.PIPE,
                env=dict(os.environ, **({} if realtime else {"GILTY_NO_REALTIME": "1"})),
            )
            before = t0 = None
            for line in g.stderr:
                if before is None and line.startswith(b"gilty: recording"):
                    before, t0 = schedstat(target.pid), time.monotonic()
            g.wait()
            after, t1 = schedstat(target.pid), time.monotonic()
            report = json.loads(Path(out.name).read_text())
    finally:
        target.kill()
        target.wait()
    rows = []
    for t in report["threads"]:
        tid = t["tid"]
        if tid not in before or tid not in after:
            continue
        cpu = (after[tid][0] - before[tid][0]) / 1e9 / (t1 - t0)
        delay = (after[tid][1] - before[tid][1]) / 1e9 / (t1 - t0)
        s = t["states"]
        on_cpu = s["holding_gil"] + s["gc"] + s["native"]
        rows.append((t["name"], cpu, on_cpu, s["native"], cpu + delay, on_cpu + s["cpu_wait"]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rate", type=int, default=100)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print("| run | sampler | thread | kernel CPU | gilty on-CPU | of which native | kernel runnable | gilty runnable |")
    print("|---|---|---|---|---|---|---|---|")
    # The sampler's real-time priority (docs/states.md) alternated with the default scheduling, pair by pair.
    for i in range(args.runs):
        for realtime in (True, False):
            rows = one_run(args.python, args.seconds, args.rate, realtime)
            for name, cpu, on_cpu, native, runnable, g_runnable in rows:
                print(
                    f"| {i + 1} | {'SCHED_FIFO' if realtime else 'normal'} | {name} | {cpu:.3f} | {on_cpu:.3f} | "
                    f"{native:.3f} | {runnable:.3f} | {g_runnable:.3f} |"
                )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
