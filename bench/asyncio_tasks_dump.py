"""CPU time of reading every asyncio task of a target (`gilty dump --tasks`'s native part).

    .venv/bin/python bench/asyncio_tasks_dump.py [--tasks 10000] [--rounds 7] [--python PATH ...]

Starts bench/targets/many_tasks.py under each interpreter (default: the pyenv 3.10-3.13 builds),
attaches once, then reads all tasks `--rounds` times, measuring this process's CPU time (user + system,
RUSAGE_THREAD: the reading thread only) and wall time per read. Prints one row per interpreter:
tasks found, pages read, median and worst CPU ms. The goal: 10,000 pending tasks in at most 100 ms of
gilty CPU.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gilty import _native

HERE = Path(__file__).resolve().parent
DEFAULT = [str(Path.home() / f".pyenv/versions/{v}/bin/python3") for v in ("3.10.13", "3.11.7", "3.12.1", "3.13.0")]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--python", action="append", default=[])
    args = ap.parse_args()
    print(f"{'interpreter':<40} {'tasks':>7} {'pages':>7} {'cpu ms median':>14} {'cpu ms max':>11} {'wall ms median':>15}")
    for exe in args.python or DEFAULT:
        if not os.path.exists(exe):
            print(f"{exe}: not installed, skipped")
            continue
        proc = subprocess.Popen([exe, str(HERE / "targets" / "many_tasks.py"), str(args.tasks)], stdout=subprocess.PIPE)
        try:
            assert proc.stdout.readline().strip() == b"ready"
            target = _native.Target(proc.pid)
            cpus, walls, found, pages = [], [], 0, 0
            for _ in range(args.rounds):
                c0, w0 = cpu(), time.perf_counter()
                snap = target.tasks()
                cpus.append((cpu() - c0) * 1000)
                walls.append((time.perf_counter() - w0) * 1000)
                found, pages = len(snap["tasks"]), snap["pages_read"]
            print(
                f"{exe:<40} {found:>7} {pages:>7} {statistics.median(cpus):>14.1f} {max(cpus):>11.1f} {statistics.median(walls):>15.1f}"
            )
        finally:
            proc.kill()
            proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
