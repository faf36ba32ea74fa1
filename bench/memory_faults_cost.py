"""What `gilty memory --faults` costs the workers: the touching loop of tests/targets/fault_server.py
(reads every shared float: one copy-on-write fault per 4 KiB page, the fault-heaviest code a worker
runs) timed in each worker with and without --faults, on fresh fork servers, in alternating order.

    .venv/bin/python bench/memory_faults_cost.py [--python PATH] [--rounds 7] [--floats 1500000]
                                                 [--period 1] [--nice N] [--json FILE]

Three arms per round: no gilty, `gilty memory` alone, `gilty memory --faults`. Reported: the median
touch time (wall, and the worker's CPU time, kernel time included) of each, the slowdown of --faults
against `gilty memory` alone and against no gilty, the faults sampled per second per worker during
the touch (pages copied / touch time / period), and the reading thread's CPU time per run. --nice N
(e.g. -10 on a shared machine) runs it all in a session and autogroup of its own at that nice value,
as bench/memory_cost.py does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from memory_cost import set_nice

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "targets" / "fault_server.py"
DEFAULT_PYTHON = os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3")


def one_run(python: str, floats: int, arm: str, period: int) -> tuple:
    env = dict(os.environ, FAULT_FLOATS=str(floats), FAULT_LISTS="1000", FAULT_SKIP_COLLECT="1", FAULT_WORKERS="2")
    server = subprocess.Popen([python, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    gilty = None
    report = None
    try:
        master = int(server.stdout.readline().split()[1])
        if arm != "none":
            cmd = [sys.executable, "-m", "gilty", "memory", "--pid", str(master), "--format", "json"]
            if arm == "faults":
                cmd += ["--faults"] + (["--fault-period", str(period)] if period != 1 else [])
            genv = dict(os.environ, PYTHONPATH=str(REPO / "python"))
            gilty = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=genv)
            while "measuring" not in gilty.stderr.readline():
                pass
            time.sleep(0.3)
        server.stdin.write("go\n")
        server.stdin.flush()
        results = [json.loads(server.stdout.readline()) for _ in range(2)]
        if gilty is not None:
            time.sleep(0.3)
            gilty.send_signal(signal.SIGINT)
            out, _ = gilty.communicate(timeout=60)
            report = json.loads(out)["faults"] if arm == "faults" else None
    finally:
        server.stdin.write("end\n")
        server.stdin.close()
        server.wait(timeout=30)
    return results, report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=DEFAULT_PYTHON)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--floats", type=int, default=1_500_000)
    ap.add_argument("--period", type=int, default=1)
    ap.add_argument("--nice", type=int)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.nice is not None:
        set_nice(args.nice)
    arms = ("none", "memory", "faults")
    wall: dict = {a: [] for a in arms}
    cpu_of: dict = {a: [] for a in arms}
    rates, reader = [], []
    for i in range(args.rounds):
        for arm in arms if i % 2 == 0 else tuple(reversed(arms)):
            results, report = one_run(args.python, args.floats, arm, args.period)
            wall[arm].extend(r["touch_s"] for r in results)
            cpu_of[arm].extend(r["touch_cpu_s"] for r in results)
            if report is not None:
                rates.extend(r["touch_bytes"] / 4096 / r["touch_s"] / args.period for r in results)
                reader.append(report["cost"]["reader_cpu_s"])
    med = {a: (statistics.median(wall[a]), statistics.median(cpu_of[a])) for a in arms}
    out = {
        "python": args.python,
        "floats": args.floats,
        "period": args.period,
        "rounds": args.rounds,
        "nice": args.nice,
        "touch_wall_s": {a: med[a][0] for a in arms},
        "touch_cpu_s": {a: med[a][1] for a in arms},
        "wall_slowdown_vs_memory": med["faults"][0] / med["memory"][0] - 1,
        "cpu_slowdown_vs_memory": med["faults"][1] / med["memory"][1] - 1,
        "wall_slowdown_vs_none": med["faults"][0] / med["none"][0] - 1,
        "samples_per_s_per_worker": statistics.median(rates),
        "reader_cpu_s_per_run": statistics.median(reader),
    }
    print(
        "touch loop, median ms wall / CPU: "
        + ", ".join(f"{a} {med[a][0] * 1e3:.0f} / {med[a][1] * 1e3:.0f}" for a in arms)
        + f"; --faults vs `gilty memory` alone: wall {out['wall_slowdown_vs_memory']:+.1%}, CPU {out['cpu_slowdown_vs_memory']:+.1%}"
        + f"; {out['samples_per_s_per_worker']:.0f} faults sampled per second per worker during the loop;"
        + f" reader CPU {out['reader_cpu_s_per_run']:.2f} s per run"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
