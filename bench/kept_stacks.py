"""Stacks kept from a thread that calls all the time, and the bias left in what is kept.

    .venv/bin/python bench/kept_stacks.py [--python PATH ...] [--seconds 3] [--rate 1000] [--repeats 1]

Per interpreter, with the target pinned to CPU 0 and the sampler to CPU 1 (each on its own CPU):

1. tests/targets/recursive.py (the main thread recursing 20 deep and back, forever): passes, stacks
   kept (share of passes), and kept stacks that are torn, by two tests: the structural one of
   tests/integration/test_stacks.py (`<module>` under 1-21 `recurse` frames) and a stricter one,
   every caller standing at its call line (a mix of two moments can pass the first, not the second).
2. tests/targets/call_mix.py (20-deep recursions and a loop without calls, alternating every half
   millisecond, each timed in-process over the same window): the share of kept samples in the
   call-heavy phase against its share of the time, and the bias (sampled minus true, in points);
   with the share of the window the target waited for its CPU (run delay from schedstat): where
   that is more than a few percent, whole time slices land in one phase and the bias is noise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RECURSIVE = os.path.join(REPO, "tests", "targets", "recursive.py")
CALL_MIX = os.path.join(REPO, "tests", "targets", "call_mix.py")


def line_of(path: str, marker: str) -> int:
    for n, text in enumerate(open(path, encoding="utf-8"), 1):
        if text.rstrip().endswith(f"# LINE:{marker}"):
            return n
    raise SystemExit(f"no LINE:{marker} in {path}")


def pyenv_pythons() -> list:
    root = os.path.expanduser("~/.pyenv/versions")
    out = [os.path.join(root, v, "bin", "python3") for v in ("3.10.13", "3.11.7", "3.12.1", "3.13.0")]
    return [p for p in out if os.path.exists(p)] or [sys.executable]


def sample(pid: int, seconds: float, rate: float) -> tuple:
    """(passes, [stack of the main thread per kept sample, innermost first], errors)."""
    from gilty import _native

    sampler = _native.Sampler(_native.Target(pid), rate)
    passes, stacks, frames, table = 0, [], {}, {}
    errors = {"torn_retried": 0, "torn_dropped": 0, "read_failed": 0}
    done = 0.0
    while done < seconds:
        batch = sampler.collect(0.25)
        done += 0.25
        passes += len(batch["times"])
        table.update(batch["stacks"])
        frames.update(batch["frames"])
        for k, v in batch["errors"].items():
            errors[k] = errors.get(k, 0) + v
        for tid, _state, stack_id, n in batch["counts"]:
            if stack_id >= 0 and tid == pid:  # the main thread
                stack = [frames[f] for f in table[stack_id]]
                stacks.extend([[(fn, os.path.basename(file), line) for fn, file, line in stack]] * n)
    return passes, stacks, errors


def run_delay_s(pid: int) -> float:
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def start(python: str, script: str) -> subprocess.Popen:
    proc = subprocess.Popen(["taskset", "-c", "0", python, script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def recursion(python: str, seconds: float, rate: float) -> dict:
    proc = start(python, RECURSIVE)
    try:
        passes, stacks, errors = sample(proc.pid, seconds, rate)
    finally:
        proc.kill()
        proc.wait()
    script = "recursive.py"
    module_lines = {line_of(RECURSIVE, m) for m in ("ready", "loop", "module")}
    call_line, module_call = line_of(RECURSIVE, "recurse"), line_of(RECURSIVE, "module")
    structural = [
        s
        for s in stacks
        if s[-1][:2] != ("<module>", script)
        or s[-1][2] not in module_lines
        or len(s) > 22
        or any(f[0] != "recurse" for f in s[:-1])
    ]
    strict = [
        s
        for s in stacks
        if s not in structural and (any(f[2] != call_line for f in s[1:-1]) or (len(s) > 1 and s[-1][2] != module_call))
    ]
    return {
        "passes": passes,
        "kept": len(stacks),
        "kept_share": len(stacks) / passes if passes else 0.0,
        "torn_structural": len(structural),
        "torn_call_line": len(strict),
        "errors": errors,
    }


def bias(python: str, seconds: float, rate: float) -> dict:
    proc = start(python, CALL_MIX)
    try:
        proc.send_signal(signal.SIGUSR1)
        before = json.loads(proc.stdout.readline())
        waited = run_delay_s(proc.pid)
        passes, stacks, errors = sample(proc.pid, seconds, rate)
        waited = run_delay_s(proc.pid) - waited
        proc.send_signal(signal.SIGUSR1)
        after = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    true = {k: after[k] - before[k] for k in before}
    true_share = true["calls"] / (true["calls"] + true["flat"])
    phase = [next((f[0] for f in s if f[0] in ("calls", "flat")), None) for s in stacks]
    n_calls, n_flat = phase.count("calls"), phase.count("flat")
    sampled_share = n_calls / (n_calls + n_flat) if n_calls + n_flat else float("nan")
    return {
        "passes": passes,
        "kept": len(stacks),
        "run_delay_share": waited / sum(true.values()),
        "true_calls_share": true_share,
        "sampled_calls_share": sampled_share,
        "bias_points": 100 * (sampled_share - true_share),
        "errors": errors,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", action="append")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.sched_setaffinity(0, {1})
    print(
        "| interpreter | passes | kept | kept share | torn (structure) | torn (call line) | calls: true share | calls: sampled share | bias (points) | target waited for CPU |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for python in args.python or pyenv_pythons():
        version = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
        ).stdout.strip()
        for _ in range(args.repeats):
            r = recursion(python, args.seconds, args.rate)
            b = bias(python, args.seconds, args.rate)
            if args.json:
                print(json.dumps({"python": version, "recursion": r, "bias": b}))
            print(
                f"| {version} | {r['passes']} | {r['kept']} | {100 * r['kept_share']:.1f} % | {r['torn_structural']} | "
                f"{r['torn_call_line']} | {100 * b['true_calls_share']:.1f} % | {100 * b['sampled_calls_share']:.1f} % | "
                f"{b['bias_points']:+.1f} | {100 * b['run_delay_share']:.0f} % |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
