"""What one sampling pass costs: 32 threads x ~15 frames (bench/targets/mixed32.py), per interpreter.

    .venv/bin/python bench/pass_cost.py [--python PATH ...] [--rate 20000] [--seconds 3] [--cpu 1]

For each interpreter, starts mixed32 and runs bench/gilty_sampler.py against it at --rate (far
above what a pass allows, so the sampler runs flat out), pinned to --cpu (one core; -1: not
pinned). Reported per interpreter: achieved passes/s, gilty's CPU per pass and per pass per
thread, the passes/s one fully available core would sustain (1 / CPU per pass), and the torn
stacks retried/dropped. CPU time is what the sampling loop used (user + system), so it does not
depend on how busy the rest of the machine is; the achieved rate does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
MIXED32 = os.path.join(HERE, "targets", "mixed32.py")
SAMPLER = os.path.join(HERE, "gilty_sampler.py")
THREADS = 32


def pyenv_pythons() -> list:
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return [sys.executable]
    out = []
    for v in ("3.10.13", "3.11.7", "3.12.1", "3.13.0"):
        p = os.path.join(root, "versions", v, "bin", "python3")
        if os.path.exists(p):
            out.append(p)
    return out


def measure(python: str, rate: float, seconds: float, cpu: Optional[int]) -> dict:
    target = subprocess.Popen([python, MIXED32, "--threads", str(THREADS)], stdout=subprocess.PIPE, text=True)
    try:
        line = target.stdout.readline()
        pid = int(line.split()[1])
        prefix = ["taskset", "-c", str(cpu)] if cpu is not None and cpu >= 0 else []
        cmd = prefix + [sys.executable, SAMPLER, "--pid", str(pid), "--rate", str(rate), "--duration", str(seconds)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "sampler failed")
        r = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        target.send_signal(signal.SIGTERM)
        try:
            target.wait(5)
        except subprocess.TimeoutExpired:
            target.kill()
            target.wait()
    per_pass = r["cpu_s"] / r["samples"] if r["samples"] else float("nan")
    return {
        "python": python,
        "passes": r["samples"],
        "achieved_hz": r["achieved_hz"],
        "cpu_ms_per_pass": 1000 * per_pass,
        "cpu_us_per_thread": 1e6 * per_pass / THREADS,
        "one_core_hz": 1 / per_pass if per_pass > 0 else None,
        "cpu_share": r["cpu_share"],
        "errors": r["errors"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append")
    parser.add_argument("--rate", type=float, default=20000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--cpu", type=int, default=1, help="pin the sampler to this CPU (-1: not pinned)")
    parser.add_argument("--json", action="store_true", help="print every measurement as JSON")
    args = parser.parse_args()
    rows = [measure(p, args.rate, args.seconds, args.cpu) for p in (args.python or pyenv_pythons())]
    if args.json:
        print(json.dumps(rows, indent=1))
    print(
        "| target | passes | achieved passes/s | CPU ms per pass | CPU µs per thread per pass | one core: passes/s | torn retried / dropped |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        e = r["errors"]
        name = os.path.basename(os.path.dirname(os.path.dirname(r["python"]))) or r["python"]
        print(
            f"| {name} | {r['passes']} | {r['achieved_hz']:.0f} | {r['cpu_ms_per_pass']:.3f} | {r['cpu_us_per_thread']:.1f} "
            f"| {r['one_core_hz']:.0f} | {e.get('torn_retried', 0)} / {e.get('torn_dropped', 0)} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
