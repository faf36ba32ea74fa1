"""What one `gilty specialization` run costs a target with 2,000 hot code objects.

    .venv/bin/python bench/specialization_cost.py [--python PATH] [--functions 2000] [--rounds 5]
                                                   [--duration 5] [--read-interval MS] [--json FILE]

bench/targets/many_codes.py calls --functions distinct functions round-robin on one thread and counts
its calls. Each round measures its throughput over a window with no gilty (baseline) and over the
same window inside a `gilty specialization --duration D` run (the window starts 0.5 s after gilty is
started, ends before it stops), in an order alternated from round to round. Reported: median, quartiles and range
over rounds of throughput(gilty) / throughput(baseline) of the same round, the same ratio for calls per
CPU-second of the target (what gilty's reads cost the target's own execution, without the scheduling
noise of a shared machine), gilty's CPU time per run (what it takes from other work on a full machine),
and what the run read (code objects followed, read passes). Default target interpreter: pyenv 3.12.1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TARGET = os.path.join(HERE, "targets", "many_codes.py")
GILTY = os.path.join(REPO, ".venv", "bin", "gilty")


def default_python() -> str:
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip() or os.path.expanduser("~/.pyenv")
    return os.path.join(root, "versions", "3.12.1", "bin", "python3")


def window(target: subprocess.Popen, seconds: float) -> dict:
    target.stdin.write(f"window {seconds}\n")
    target.stdin.flush()
    return json.loads(target.stdout.readline())


def gilty_run(target: subprocess.Popen, pid: int, args) -> tuple:
    out = tempfile.NamedTemporaryFile(prefix="gilty-spec-cost-", suffix=".json", delete=False).name
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    g = subprocess.Popen(
        [
            GILTY,
            "specialization",
            "--pid",
            str(pid),
            "--duration",
            str(args.duration),
            "--read-interval",
            str(args.read_interval),
            "--format",
            "json",
            "-o",
            out,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    w = window(target, args.duration - 1.0)
    g.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.load(open(out))
    os.unlink(out)
    proc = report["session"]["processes"][0]
    return (
        w,
        cpu,
        {
            "codes": len(proc["codes"]),
            "read_passes": proc["read_passes"],
            "running_samples": proc["running_samples"],
            "busy_s": proc["busy_s"],
        },
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=default_python())
    ap.add_argument("--functions", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--read-interval", type=float, default=5.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    target = subprocess.Popen(
        [args.python, TARGET, str(args.functions)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    pid = int(target.stdout.readline().split()[1])
    rows = []
    try:
        for r in range(args.rounds):
            order = ["baseline", "gilty"] if r % 2 == 0 else ["gilty", "baseline"]
            got = {}
            for what in order:
                if what == "baseline":
                    got["baseline"] = window(target, args.duration - 1.0)
                else:
                    got["gilty"], got["gilty_cpu_s"], got["read"] = gilty_run(target, pid, args)
            ratio = got["gilty"]["cps"] / got["baseline"]["cps"]
            per_cpu = lambda w: w["calls"] / w["cpu_s"]  # noqa: E731 - calls per CPU-second of the target
            cpu_ratio = per_cpu(got["gilty"]) / per_cpu(got["baseline"])
            rows.append({"ratio": ratio, "cpu_ratio": cpu_ratio, **got})
            print(
                f"round {r + 1}: baseline {got['baseline']['cps']:.0f} calls/s, with gilty {got['gilty']['cps']:.0f} "
                f"({ratio:.3f}; per target CPU-second {cpu_ratio:.3f}); gilty CPU {got['gilty_cpu_s']:.2f} s; "
                f"read {got['read']}",
                flush=True,
            )
    finally:
        target.stdin.write("quit\n")
        target.stdin.close()
        target.wait(timeout=10)
    ratios = [r["ratio"] for r in rows]
    summary = {
        "python": subprocess.run(
            [args.python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
        ).stdout.strip(),
        "functions": args.functions,
        "duration_s": args.duration,
        "read_interval_ms": args.read_interval,
        "median_ratio": statistics.median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "quartiles_ratio": statistics.quantiles(ratios, n=4)[::2] if len(ratios) > 1 else ratios * 2,
        "quartiles_cpu_ratio": statistics.quantiles([r["cpu_ratio"] for r in rows], n=4)[::2]
        if len(rows) > 1
        else [rows[0]["cpu_ratio"]] * 2,
        "median_cpu_ratio": statistics.median(r["cpu_ratio"] for r in rows),
        "min_cpu_ratio": min(r["cpu_ratio"] for r in rows),
        "max_cpu_ratio": max(r["cpu_ratio"] for r in rows),
        "loadavg_1m": os.getloadavg()[0],
        "median_gilty_cpu_s": statistics.median(r["gilty_cpu_s"] for r in rows),
        "cpus": os.cpu_count(),
        "rounds": rows,
    }
    print(
        f"median throughput with gilty / without: {summary['median_ratio']:.3f} (range {summary['min_ratio']:.3f}-"
        f"{summary['max_ratio']:.3f}, quartiles {summary['quartiles_ratio'][0]:.3f}-{summary['quartiles_ratio'][1]:.3f}); "
        f"per target CPU-second: {summary['median_cpu_ratio']:.3f} (range {summary['min_cpu_ratio']:.3f}-"
        f"{summary['max_cpu_ratio']:.3f}, quartiles {summary['quartiles_cpu_ratio'][0]:.3f}-"
        f"{summary['quartiles_cpu_ratio'][1]:.3f}); gilty CPU per {args.duration:g} s run: "
        f"{summary['median_gilty_cpu_s']:.2f} s; load average {summary['loadavg_1m']:.1f} on {os.cpu_count()} CPUs"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
