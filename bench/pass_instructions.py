"""Instructions per sampling pass, counted by callgrind: a figure the machine's load does not move.

    .venv/bin/python bench/pass_instructions.py [--python PATH ...] [--build NAME=PYTHONPATH ...]
                                                [--seconds 6 18] [--rate 10] [--repeats 1]

For each interpreter and each build, starts bench/targets/mixed32.py (32 threads) and runs
bench/gilty_sampler.py against it under `valgrind --tool=callgrind`, counting only inside
`Sampler::sample_pass` (one sampling pass: thread list, GIL, syscalls, stack walks, aggregation).
Two runs of different lengths per (interpreter, build): the instructions per pass are the
difference of their counts over the difference of their passes, so the first passes' decoding of
every code object (paid once) drops out. Kernel work (the reads' system calls) is not counted.
The rate is one callgrind keeps up with, so that passes are spaced alike in every run: a pass that
comes later finds more threads moved since the last (more stacks walked, fewer kept) and carries
more of the work done per unit of time (the thread-name refresh every 250 ms), so builds compared
at the rate they happen to reach differ by their speed under callgrind, not by their code.

--build NAME=PYTHONPATH puts another build of gilty first on the sampler's path (a copy of
`python/` from an earlier commit, with its `_native` built there); the default is this checkout.
Builds are run one after the other per interpreter, so their targets see the same machine;
--repeats N runs that round N times, for the spread between runs of one build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MIXED32 = os.path.join(HERE, "targets", "mixed32.py")
SAMPLER = os.path.join(HERE, "gilty_sampler.py")
sys.path.insert(0, HERE)
from pass_cost import pyenv_pythons  # noqa: E402


def count(python: str, pythonpath: str, seconds: float, rate: float) -> tuple:
    """(instructions inside sample_pass, passes) of one run."""
    target = subprocess.Popen([python, MIXED32, "--threads", "32"], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(target.stdout.readline().split()[1])
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "callgrind.out")
            env = dict(os.environ)
            if pythonpath:
                env["PYTHONPATH"] = pythonpath
            cmd = [
                "valgrind",
                "--tool=callgrind",
                "--toggle-collect=*sample_pass*",
                f"--callgrind-out-file={out}",
                sys.executable,
                SAMPLER,
                "--pid",
                str(pid),
                "--rate",
                str(rate),
                "--duration",
                str(seconds),
            ]
            run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds * 20 + 300)
            if run.returncode != 0:
                raise RuntimeError(run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "sampler failed")
            passes = json.loads(run.stdout.strip().splitlines()[-1])["samples"]
            with open(out) as f:
                summary = next(line for line in f if line.startswith("summary:"))
            return int(re.split(r"\s+", summary.strip())[1]), passes
    finally:
        target.send_signal(signal.SIGTERM)
        try:
            target.wait(5)
        except subprocess.TimeoutExpired:
            target.kill()
            target.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append")
    parser.add_argument("--build", action="append", default=[], help="NAME=PYTHONPATH of another build")
    parser.add_argument("--seconds", type=float, nargs=2, default=[6.0, 18.0])
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed", file=sys.stderr)
        return 2
    builds = [b.split("=", 1) for b in args.build] + [["this checkout", ""]]
    print("| interpreter | build | passes (short, long run) | instructions per pass |")
    print("|---|---|---:|---:|")
    for python in args.python or pyenv_pythons():
        name = os.path.basename(os.path.dirname(os.path.dirname(python))) or python
        for _ in range(args.repeats):
            for build, pythonpath in builds:
                (i1, n1), (i2, n2) = (count(python, pythonpath, s, args.rate) for s in args.seconds)
                per_pass = (i2 - i1) / (n2 - n1) if n2 > n1 else float("nan")
                print(f"| {name} | {build} | {n1}, {n2} | {per_pass:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
