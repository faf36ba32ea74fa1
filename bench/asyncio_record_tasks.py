"""What `record --tasks` costs against `record` without tasks, in the same run: 1,000 asyncio tasks
(bench/targets/busy_tasks.py: 899 parked two coroutines deep, 100 busy looping over a little
Python work and `await asyncio.sleep(0)`), sampled at 100 Hz.

    .venv/bin/python bench/asyncio_record_tasks.py [--python PATH ...] [--rounds 5] [--seconds 2] [--rate 100]

Per interpreter, each round measures three windows in turn: no sampling, sampling threads only,
sampling threads and tasks (the order rotates each round). Reported: gilty's CPU per pass (this
process's sampling thread, user + system), the passes achieved, and the target's throughput (busy
task iterations per second) as a ratio of the unsampled windows of the same round: medians over the
rounds. Task reads' errors are summed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from gilty import _native

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "targets", "busy_tasks.py")
DEFAULT = [os.path.expanduser(f"~/.pyenv/versions/{v}/bin/python3") for v in ("3.10.13", "3.11.7", "3.12.1", "3.13.0")]
MODES = ("none", "threads", "tasks")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


def read_count(path: str) -> tuple:
    with open(path) as fh:
        steps, at = fh.read().split()
    return int(steps), float(at)


def window(target, mode: str, count: str, seconds: float, rate: float) -> dict:
    s0 = read_count(count)
    out = {"cpu_per_pass_ms": None, "passes": 0, "errors": {}}
    if mode == "none":
        time.sleep(seconds)
    else:
        sampler = _native.Sampler(target, rate, **({"tasks": True} if mode == "tasks" else {}))
        c0 = cpu()
        batch = sampler.collect(seconds)
        used = cpu() - c0
        passes = len(batch["times"])
        out.update(passes=passes, cpu_per_pass_ms=1000 * used / passes if passes else None)
        if mode == "tasks":
            out["errors"] = batch["tasks"]["errors"]
            out["tasks_per_pass"] = sum(c[4] for c in batch["tasks"]["counts"]) / max(batch["tasks"]["passes"], 1)
            out["passes_per_read"] = passes / max(batch["tasks"]["reads"], 1)
            out["cpu_per_read_ms"] = 1000 * used / max(batch["tasks"]["reads"], 1)
    time.sleep(0.15)  # the target's next count line comes after the window
    s1 = read_count(count)
    out["throughput"] = (s1[0] - s0[0]) / max(s1[1] - s0[1], 1e-9)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=100.0)
    args = ap.parse_args()
    print(
        f"{'interpreter':<40} {'tasks':>6} {'cpu ms/pass threads':>20} {'cpu ms/pass +tasks':>19} "
        f"{'ratio':>6} {'passes/read':>12} {'ms/read':>8} {'target threads':>15} {'target +tasks':>14}  task errors"
    )
    for exe in args.python or DEFAULT:
        if not os.path.exists(exe):
            print(f"{exe}: not installed, skipped")
            continue
        count = tempfile.mktemp(prefix="busy_tasks.")
        proc = subprocess.Popen([exe, TARGET, count], stdout=subprocess.PIPE)
        try:
            assert proc.stdout.readline().strip() == b"ready"
            target = _native.Target(proc.pid)
            per_mode: dict = {m: [] for m in MODES}
            for r in range(args.rounds):
                order = MODES[r % 3 :] + MODES[: r % 3]
                got = {m: window(target, m, count, args.seconds, args.rate) for m in order}
                for m in MODES:
                    per_mode[m].append(got[m])
                for m in ("threads", "tasks"):
                    got[m]["slowdown"] = got[m]["throughput"] / got["none"]["throughput"]
            med = lambda m, k: statistics.median(w[k] for w in per_mode[m])  # noqa: E731, B023 - used within its iteration
            errors: dict = {}
            for w in per_mode["tasks"]:
                for k, v in w["errors"].items():
                    errors[k] = errors.get(k, 0) + v
            th, tk = med("threads", "cpu_per_pass_ms"), med("tasks", "cpu_per_pass_ms")
            print(
                f"{exe:<40} {med('tasks', 'tasks_per_pass'):>6.0f} {th:>20.2f} {tk:>19.2f} {tk / th:>6.1f} "
                f"{med('tasks', 'passes_per_read'):>12.1f} {med('tasks', 'cpu_per_read_ms'):>8.1f} "
                f"{med('threads', 'slowdown'):>15.3f} {med('tasks', 'slowdown'):>14.3f}  "
                + ", ".join(f"{k} {v}" for k, v in errors.items() if v)
            )
        finally:
            proc.kill()
            proc.wait()
            for p in (count, count + ".tmp"):
                if os.path.exists(p):
                    os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
