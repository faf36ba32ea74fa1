"""What a sampling pass costs on a target with many CPU-bound threads (all GIL waiters but one).

    .venv/bin/python bench/many_threads_cost.py [--threads 200] [--rates 100,1000] [--seconds 3]
        [--rounds 3] [--build NAME=DIR ...] [--python PATH]

Starts bench/targets/cpu4.py with --threads spinning threads, then runs bench/gilty_sampler.py
against it at each rate for --seconds, --rounds times, interleaved. Reported per (build, rate): the
median of achieved passes/s, gilty's CPU per pass and per pass per thread (user + system of the
sampling loop: it depends little on how busy the machine is, the achieved rate does).

--build NAME=DIR (repeatable) compares builds of gilty side by side in one run: DIR holds a `gilty`
package with its `_native` extension (e.g. a copy of python/gilty made after building an older
commit) and is put first on PYTHONPATH. Without it, the installed gilty is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CPU4 = os.path.join(HERE, "targets", "cpu4.py")
SAMPLER = os.path.join(HERE, "gilty_sampler.py")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--rates", default="100,1000")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", action="append", default=[], help="NAME=DIR with a gilty package to measure")
    parser.add_argument("--python", default=os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3"))
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    builds = [tuple(b.split("=", 1)) for b in args.build] or [("installed", None)]

    # The target's own window must outlast every sampling run.
    window = len(builds) * len(rates) * args.rounds * (args.seconds + 2) + 30
    target = subprocess.Popen(
        [args.python, CPU4, "--threads", str(args.threads), "--window", str(window)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    results: dict = {}
    try:
        target.stdout.readline()  # "ready PID"
        target.stdin.write("go\n")
        target.stdin.flush()
        for _ in range(args.rounds):
            for rate in rates:
                for name, path in builds:
                    env = dict(os.environ)
                    if path:
                        env["PYTHONPATH"] = path
                    out = subprocess.run(
                        [sys.executable, SAMPLER, "--pid", str(target.pid), "--rate", str(rate), "--duration", str(args.seconds)],
                        capture_output=True,
                        text=True,
                        env=env,
                        timeout=args.seconds + 60,
                    )
                    if out.returncode != 0:
                        print(out.stderr, file=sys.stderr)
                        return 1
                    results.setdefault((name, rate), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        target.kill()
        target.wait()

    threads = args.threads + 1  # and the main thread, waiting
    print(
        f"cpu4 --threads {args.threads} under {args.python}; {args.rounds} rounds of {args.seconds:g} s, interleaved; medians\n"
    )
    print(
        "| build | requested Hz | achieved passes/s | CPU ms per pass | CPU µs per thread per pass | sampler CPU share | torn retried / dropped (all runs) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (name, rate), runs in results.items():
        hz = statistics.median(r["achieved_hz"] for r in runs)
        per_pass = statistics.median(r["cpu_s"] / max(r["samples"], 1) for r in runs)
        share = statistics.median(r["cpu_share"] for r in runs)
        retried = sum(r["errors"]["torn_retried"] for r in runs)
        dropped = sum(r["errors"]["torn_dropped"] for r in runs)
        print(
            f"| {name} | {rate:g} | {hz:.0f} | {1000 * per_pass:.2f} | {1e6 * per_pass / threads:.1f} | {share:.2f} | {retried} / {dropped} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
