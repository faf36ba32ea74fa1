"""`gilty dump` against `py-spy dump` on the same target: wall time and CPU time, interleaved.

    .venv/bin/python bench/dump_time.py [--python PATH] [--runs 7] [--threads 32] [--locals]

Starts bench/targets/mixed32.py (--threads threads about 15 frames deep), then runs
`gilty dump --pid` and `py-spy dump --pid` alternately --runs times each. Reported per tool: the
median and range of wall time and of CPU time (user + system of the dump process, from wait4), and
for gilty the split of one in-process run: Python start + imports, attach, one snapshot.
CPU time depends little on what else the machine runs; wall time does. --locals adds
`gilty dump --locals` and `py-spy dump --locals` to the interleaved runs, and the split then also
times one snapshot with locals.

gilty runs with its bytecode cached (PYTHONPYCACHEPREFIX in a temporary directory, filled by a first
run that is not counted), as it is once installed from a wheel; --no-bytecode-cache measures it
compiling its modules on every start instead (PYTHONDONTWRITEBYTECODE=1 with an editable install).

--instructions also counts the instructions each command executes under valgrind's callgrind (one
run each): unlike times, the counts do not move with the machine's load, so they compare the two
tools on a busy machine; `python -c pass` and `python -c "import argparse"` in the same venv are
counted beside them, the floor any Python command line starts from.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIXED32 = os.path.join(HERE, "targets", "mixed32.py")
VENV_BIN = os.path.dirname(sys.executable)


def timed(cmd: list, env: dict = None) -> tuple:
    """(wall s, CPU s, exit code) of one run of cmd."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, proc.returncode


def split(pid: int, env: dict) -> dict:
    code = (
        "import time; t0 = time.monotonic()\n"
        "from gilty.cli import main\n"
        "from gilty import _native\n"
        "t1 = time.monotonic(); target = _native.Target(%d); t2 = time.monotonic()\n"
        "target.dump(); t3 = time.monotonic()\n"
        "target.dump(locals=True); t4 = time.monotonic()\n"
        "print(t1 - t0, t2 - t1, t3 - t2, t4 - t3)\n" % pid
    )
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.split()
    total = time.monotonic() - t0
    imports, attach, snap, snap_locals = (float(x) for x in out)
    return {"process_s": total, "imports_s": imports, "attach_s": attach, "snapshot_s": snap, "locals_snapshot_s": snap_locals}


def instructions(cmd: list, env: dict) -> int:
    """Instructions executed by cmd (and its threads), counted by callgrind."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], capture_output=True, text=True, env=env
    ).stderr
    for line in out.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[-1])
    raise RuntimeError(f"no callgrind total for {cmd}: {out[-300:]}")


def summary(xs: list) -> str:
    return f"{1000 * statistics.median(xs):.0f} ms [{1000 * min(xs):.0f}, {1000 * max(xs):.0f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=None, help="target interpreter (default: pyenv 3.12.1, else this one)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--no-bytecode-cache", action="store_true")
    parser.add_argument("--locals", action="store_true", help="also time `dump --locals` (gilty and py-spy)")
    parser.add_argument("--instructions", action="store_true", help="also count instructions with callgrind")
    args = parser.parse_args()
    env = dict(os.environ)
    cache_dir = tempfile.TemporaryDirectory(prefix="gilty-pyc-")
    if args.no_bytecode_cache:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache_dir.name
    python = args.python
    if python is None:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip() if shutil.which("pyenv") else ""
        candidate = os.path.join(root, "versions", "3.12.1", "bin", "python3")
        python = candidate if root and os.path.exists(candidate) else sys.executable
    gilty = os.path.join(VENV_BIN, "gilty")
    py_spy = shutil.which("py-spy", path=VENV_BIN) or shutil.which("py-spy")
    target = subprocess.Popen([python, MIXED32, "--threads", str(args.threads)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(target.stdout.readline().split()[1])
        tools = {"gilty dump": [gilty, "dump", "--pid", str(pid)]}
        if py_spy:
            tools["py-spy dump"] = [py_spy, "dump", "--pid", str(pid)]
        if args.locals:
            tools["gilty dump --locals"] = [gilty, "dump", "--pid", str(pid), "--locals"]
            if py_spy:
                tools["py-spy dump --locals"] = [py_spy, "dump", "--pid", str(pid), "--locals"]
        results = {name: ([], []) for name in tools}
        timed(tools["gilty dump"], env)  # fills the bytecode cache
        for _ in range(args.runs):
            for name, cmd in tools.items():
                wall, cpu, rc = timed(cmd, env)
                if rc != 0:
                    print(f"{name} exited {rc}", file=sys.stderr)
                results[name][0].append(wall)
                results[name][1].append(cpu)
        parts = split(pid, env)
        counts = {}
        if args.instructions and shutil.which("valgrind"):
            floor = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "python -c 'import argparse'": [sys.executable, "-c", "import argparse"],
            }
            for name, cmd in {**tools, **floor}.items():
                counts[name] = instructions(cmd, env)
    finally:
        target.send_signal(signal.SIGTERM)
        try:
            target.wait(5)
        except subprocess.TimeoutExpired:
            target.kill()
    cache = "without a bytecode cache" if args.no_bytecode_cache else "bytecode cached"
    print(f"target: {python}, {args.threads} threads; {args.runs} runs each, interleaved; gilty {cache}")
    print("| tool | wall time, median [min, max] | CPU time, median [min, max] |")
    print("|---|---:|---:|")
    for name, (walls, cpus) in results.items():
        print(f"| {name} | {summary(walls)} | {summary(cpus)} |")
    print(
        "gilty in one process: %.0f ms in all; Python start + imports %.0f ms, attach %.1f ms, snapshot %.1f ms"
        % tuple(1000 * parts[k] for k in ("process_s", "imports_s", "attach_s", "snapshot_s"))
    )
    if args.locals:
        print("one snapshot with locals: %.1f ms" % (1000 * parts["locals_snapshot_s"]))
    if counts:
        print("| command | instructions (callgrind) |")
        print("|---|---:|")
        for name, n in counts.items():
            print(f"| {name} | {n / 1e6:.1f} M |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
