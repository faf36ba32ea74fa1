"""What `gilty record --native` costs the target, beside `py-spy record --native`, in one run.

    .venv/bin/python bench/record_native.py [--python PATH] [--seconds 4] [--repeats 3]

The target (built here: tests/targets/native_chain/ by gcc, as the tests build it) calls a C
function in a loop (`native_chain.outer`, ~50 us a call, the GIL held) and counts its calls over a
window of `--seconds` that starts once the profiler is attached. Each run starts two identical
targets at once, profiles one and compares it with the other (the control), so that the machine's
other load weighs on both. Each condition (unprofiled, which gives the noise; gilty; py-spy; at
100 and 1000 Hz) runs `--repeats` times, interleaved; the medians are printed. Figures:

- calls/s: the profiled target's throughput over wall time (py-spy stops it with ptrace per sample);
- calls per CPU-s: over its own CPU time (the kernel's stack copy for a perf sample is charged to
  the target's CPU time, so in-kernel sampling cost shows here);
- slowdown: 1 - its calls/s / the control's; CPU lost: 1 - its calls per CPU-s / the control's;
- profiler CPU: the profiler's CPU time over the window, as a share of one CPU;
- kernel: the profiled target's system CPU time beyond the control's, as a share of its CPU time:
  the work the kernel does in the target for the profiler (perf samples' stack copies, ptrace stops),
  little disturbed by the machine's other load (the target itself makes no system calls in the window).

`--python-only` adds gilty without `--native`, to tell what the C frames add to gilty's own cost.
`--build NAME=DIR` (repeatable) adds `gilty record --native` run from another build's package (DIR
holds a `gilty` package with its `_native` module, e.g. a copy of python/gilty taken before a
change), so that builds are measured side by side in one run; `--no-py-spy` leaves py-spy out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from native_dump import build  # the test C extension for one interpreter (same directory)

VENV_BIN = os.path.dirname(sys.executable)
BUILDS: dict = {}  # --build NAME=DIR
TICK = os.sysconf("SC_CLK_TCK")

TARGET = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import native_chain
print("ready", flush=True)
sys.stdin.readline()
t0 = time.monotonic(); c0 = os.times()
end = t0 + float(sys.argv[2]); n = 0
while time.monotonic() < end:
    native_chain.outer(40_000, False)
    n += 1
c1 = os.times()
print(n, time.monotonic() - t0, c1.user - c0.user + c1.system - c0.system, c1.system - c0.system, flush=True)
"""


def cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def one_run(python: str, ext: str, seconds: float, tool: str, rate: int, scratch: str) -> dict:
    # Two identical targets run at once: one profiled, one not. The machine's other load, CPU
    # frequency and the sibling hyperthread weigh on both alike, so their ratio is the cost.
    target, control = (
        subprocess.Popen([python, "-c", TARGET, ext, str(seconds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    )
    for t in (target, control):
        assert t.stdout.readline().strip() == "ready"
    prof = None
    env = None
    if tool in ("gilty", "gilty-python") or tool in BUILDS:
        cmd = [
            os.path.join(VENV_BIN, "gilty"),
            "record",
            "--pid",
            str(target.pid),
            "--rate",
            str(rate),
            "--duration",
            str(seconds + 3),
            "-o",
            os.path.join(scratch, "g.json"),
        ]
        if tool != "gilty-python":
            cmd.append("--native")
        if tool in BUILDS:
            # The other build's package first on the path, run as a module.
            cmd = [sys.executable, "-m", "gilty", *cmd[1:]]
            env = dict(os.environ, PYTHONPATH=BUILDS[tool])
    elif tool == "py-spy":
        cmd = [
            os.path.join(VENV_BIN, "py-spy"),
            "record",
            "--native",
            "--pid",
            str(target.pid),
            "--rate",
            str(rate),
            "--duration",
            str(int(seconds + 3)),
            "--format",
            "raw",
            "-o",
            os.path.join(scratch, "p.txt"),
        ]
    if tool != "none":
        prof = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(2.0)  # attached and sampling
    prof_cpu0 = cpu_s(prof.pid) if prof else 0.0
    for t in (target, control):
        t.stdin.write("go\n")
        t.stdin.flush()
    n, wall, cpu, sys_cpu = target.stdout.readline().split()
    prof_cpu = (cpu_s(prof.pid) - prof_cpu0) if prof else 0.0
    n0, wall0, cpu0, sys0 = control.stdout.readline().split()
    for t in (target, control):
        t.kill()
        t.wait()
    err = ""
    if prof:
        _, err = prof.communicate(timeout=60)
    if prof and prof.returncode not in (0, 8):  # 8: gilty's "target exited before the duration"
        sys.exit(f"{tool} exited {prof.returncode}: {err.strip()[-500:]}")
    return {
        "calls_s": int(n) / float(wall),
        "calls_cpu_s": int(n) / float(cpu),
        "prof_cpu": prof_cpu / float(wall),
        "slowdown": 1 - (int(n) / float(wall)) / (int(n0) / float(wall0)),
        "cpu_lost": 1 - (int(n) / float(cpu)) / (int(n0) / float(cpu0)),
        "kernel": (float(sys_cpu) - float(sys0) * float(cpu) / float(cpu0)) / float(cpu),
    }


def quartiles(values: list) -> tuple:
    if len(values) < 4:
        return min(values), max(values)
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3"))
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--python-only", action="store_true", help="also gilty without --native (what the C frames add)")
    ap.add_argument("--rates", default="100,1000", help="sampling rates to compare (comma-separated)")
    ap.add_argument(
        "--build",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="also gilty --native from the `gilty` package in DIR (another build), shown as NAME",
    )
    ap.add_argument("--no-py-spy", action="store_true", help="leave py-spy out")
    args = ap.parse_args()
    if not args.no_py_spy and not os.path.exists(os.path.join(VENV_BIN, "py-spy")):
        sys.exit("py-spy is not installed in this venv (make setup)")
    for spec in args.build:
        name, _, path = spec.partition("=")
        if not name or not os.path.isdir(os.path.join(path, "gilty")) or name in ("gilty", "gilty-python", "py-spy", "none"):
            sys.exit(f"--build {spec}: expected NAME=DIR with a gilty package in DIR, NAME not a built-in condition")
        BUILDS[name] = os.path.abspath(path)
    rates = [int(r) for r in args.rates.split(",")]
    tools = (["gilty-python"] if args.python_only else []) + list(BUILDS) + ["gilty"] + ([] if args.no_py_spy else ["py-spy"])
    conditions = [("none", 0)] + [(tool, rate) for rate in rates for tool in tools]
    results: dict = {c: [] for c in conditions}
    with tempfile.TemporaryDirectory() as scratch:
        build(args.python, scratch)
        for _ in range(args.repeats):
            for tool, rate in conditions:
                results[(tool, rate)].append(one_run(args.python, scratch, args.seconds, tool, rate, scratch))
    med = {c: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for c, rs in results.items()}
    print(f"target: {args.python}, {args.seconds:g} s windows, {args.repeats} interleaved repeats, load {os.getloadavg()[0]:.1f}")
    print(
        f"{'condition':<20}{'calls/s':>10}{'slowdown':>10}{'calls/CPU-s':>13}{'CPU lost':>10}{'profiler CPU':>14}"
        f"{'slowdown IQR':>20}{'CPU lost IQR':>20}{'kernel':>9}"
    )
    for (tool, rate), m in med.items():
        name = "unsampled" if tool == "none" else f"{tool} {rate} Hz".replace("gilty-python", "gilty, no C")
        slow, lost = m["slowdown"], m["cpu_lost"]
        spread = [quartiles([r[k] for r in results[(tool, rate)]]) for k in ("slowdown", "cpu_lost")]
        print(
            f"{name:<20}{m['calls_s']:>10.0f}{slow:>10.1%}{m['calls_cpu_s']:>13.0f}{lost:>10.1%}{m['prof_cpu']:>14.1%}"
            + "".join(f"{f'{lo:.1%} .. {hi:.1%}':>20}" for lo, hi in spread)
            + f"{m['kernel']:>9.2%}"
        )
    for rate in rates:
        if args.no_py_spy:
            break
        g = med[("gilty", rate)]["slowdown"]
        p = med[("py-spy", rate)]["slowdown"]
        print(f"{rate} Hz: gilty's slowdown / py-spy's = {g / p if p > 0 else float('nan'):.2f}")


if __name__ == "__main__":
    main()
