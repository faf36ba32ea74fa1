"""`gilty dump --native` beside `py-spy dump --native` on the same target: wall time, the dump
process's CPU time, and how many dumps show the C chain (inner_spin <- middle <- outer <- spin),
interleaved runs.

    .venv/bin/python bench/native_dump.py [--python PATH] [--runs 10]

The target is tests/targets/native_chain.py with the test C extension built for PATH by gcc
(tests/integration/native_ext.py's flags), in "hold" mode: one thread spins in C holding the GIL.
py-spy stops the target (ptrace) while it reads it; gilty does not. The target's lost time is not
reported: on a shared 2-CPU machine it measures the other jobs more than either tool.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TARGET = os.path.join(REPO, "tests", "targets", "native_chain.py")
SOURCE = os.path.join(REPO, "tests", "targets", "native_chain", "native_chain.c")
VENV_BIN = os.path.dirname(sys.executable)
TICK = os.sysconf("SC_CLK_TCK")


def build(python: str, out: str) -> None:
    probe = subprocess.run(
        [
            python,
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    include, suffix = probe.stdout.split()
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-O1",
            "-g",
            "-fno-inline",
            "-fno-optimize-sibling-calls",
            f"-I{include}",
            SOURCE,
            "-o",
            os.path.join(out, f"native_chain{suffix}"),
        ],
        check=True,
    )


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run(cmd: list, pid: int) -> tuple:
    before_target = cpu_s(pid)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    out = proc.stdout.read()
    proc.stdout.close()
    proc.stderr.close()
    got = cpu_s(pid) - before_target
    return wall, usage.ru_utime + usage.ru_stime, max(0.0, wall - got), out


def chain_shown(text: str) -> bool:
    block = text.split("'spinner'", 1)[-1] if "'spinner'" in text else text.split("spinner", 1)[-1]
    names = [ln.strip().split(" ")[0] for ln in block.splitlines()[1:8]]
    return names[:3] == ["inner_spin", "middle", "outer"] and any(n == "spin" for n in names[3:6])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3"))
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    pyspy = shutil.which("py-spy", path=VENV_BIN) or shutil.which("py-spy")
    with tempfile.TemporaryDirectory() as tmp:
        build(args.python, tmp)
        target = subprocess.Popen([args.python, TARGET, tmp, "hold"], stdout=subprocess.PIPE, text=True)
        assert target.stdout.readline().strip() == "ready"
        tools = {"gilty dump --native": [os.path.join(VENV_BIN, "gilty"), "dump", "--native", "--pid", str(target.pid)]}
        if pyspy:
            tools["py-spy dump --native"] = [pyspy, "dump", "--native", "--pid", str(target.pid)]
        results = {name: [] for name in tools}
        try:
            for _ in range(args.runs):
                for name, cmd in tools.items():
                    results[name].append(run(cmd, target.pid))
                    time.sleep(0.2)
        finally:
            target.kill()
            target.wait()
    print(f"{args.runs} runs each, interleaved; target {args.python}; load {os.getloadavg()[0]:.1f}")
    print(f"{'tool':<24}{'wall ms (median)':>18}{'CPU ms (median)':>17}{'C chain shown':>15}")
    for name, rows in results.items():
        wall = statistics.median(r[0] for r in rows) * 1000
        cpu = statistics.median(r[1] for r in rows) * 1000
        shown = sum(chain_shown(r[3]) for r in rows)
        print(f"{name:<24}{wall:>18.1f}{cpu:>17.1f}{shown:>11}/{len(rows)}")


if __name__ == "__main__":
    main()
