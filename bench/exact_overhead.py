"""What exact mode costs the target, beside sampling alone and nothing, in one interleaved run.

    .venv/bin/python bench/exact_overhead.py [--python PATH] [--rounds 3] [--window 4]

Targets: bench/targets/switchy.py (8 threads calling time.sleep(0) in a loop plus a spinner: a GIL
handoff on every call, the worst case for exact mode) and bench/targets/cpu4.py (4 CPU-bound
threads: few handoffs). Configurations: none; `gilty record --rate 1000` (sampling); the same with
`--exact`. Each round runs every configuration once per target; reported are the medians of the
target's throughput relative to the same round's baseline, and exact mode's events/s and lost events
from its report. gilty attaches before the target's measurement window opens and stays attached
past its end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
GILTY = os.path.join(REPO, ".venv", "bin", "gilty")
TARGETS = {
    "switchy": (os.path.join(HERE, "targets", "switchy.py"), "sleeps_per_s"),
    "cpu4": (os.path.join(HERE, "targets", "cpu4.py"), "ips"),
}
CONFIGS = ("none", "sampling@1000", "sampling+exact@1000")


def run_once(python: str, target: str, config: str, window: float) -> dict:
    script, metric = TARGETS[target]
    proc = subprocess.Popen([python, script, "--window", str(window)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("ready"), line
        gilty = None
        if config != "none":
            cmd = [GILTY, "record", "--pid", str(proc.pid), "--rate", "1000", "--duration", str(window + 3), "--format", "json"]
            if "exact" in config:
                cmd.append("--exact")
            gilty = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            time.sleep(1.0)  # attached and sampling before the window opens
        proc.stdin.write("go\n")
        proc.stdin.flush()
        result = json.loads(proc.stdout.readline())
        out = {"throughput": result[metric]}
        if gilty is not None:
            report = json.loads(gilty.communicate(timeout=120)[0] or "{}")
            ov = report.get("exact_overhead") or {}
            out.update(events_per_s=ov.get("events_per_s"), lost=ov.get("lost"))
        return out
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python3")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--window", type=float, default=4.0)
    a = p.parse_args()
    results: dict = {(t, c): [] for t in TARGETS for c in CONFIGS}
    for r in range(a.rounds):
        for target in TARGETS:
            order = CONFIGS[r % len(CONFIGS) :] + CONFIGS[: r % len(CONFIGS)]
            runs = {c: run_once(a.python, target, c, a.window) for c in order}
            for c, res in runs.items():
                res["ratio"] = res["throughput"] / runs["none"]["throughput"]
                results[(target, c)].append(res)
    print("| target | configuration | throughput vs none, median [min, max] | exact events/s | lost |")
    print("| --- | --- | --- | --- | --- |")
    for (target, config), runs in results.items():
        ratios = [x["ratio"] for x in runs]
        ev = [x["events_per_s"] for x in runs if x.get("events_per_s")]
        lost = sum(x.get("lost") or 0 for x in runs)
        print(
            f"| {target} | {config} | {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}] | "
            f"{statistics.median(ev):.0f} | {lost if ev else '-'} |"
            if ev
            else f"| {target} | {config} | {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}] | - | - |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
