"""gilty's own cost, as a user sees it: CPU time and memory of a whole `gilty record` process.

    .venv/bin/python bench/cli_cpu.py [--python PATH] [--rates 100,1000] [--duration 10] [--nice -10]

For each rate: starts bench/targets/cpu4.py (4 spinning threads), runs
`gilty record --pid PID --duration D --rate R -o FILE.json` against it, and reports the
record process's wall time, user and system CPU time (wait4 rusage: start-up, sampling,
analysis and writing the report included), peak RSS, and the samples it got. The target's
own throughput is printed alongside.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from overhead import CPU4, DEFAULT_PYTHON, set_nice  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=DEFAULT_PYTHON, help=f"target interpreter (default {DEFAULT_PYTHON})")
    parser.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")], default=[100.0, 1000.0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--nice", type=int, default=None, help="as in bench/overhead.py")
    args = parser.parse_args()
    if args.nice is not None:
        set_nice(args.nice)
    gilty = os.path.join(os.path.dirname(sys.executable), "gilty")

    print("| rate (Hz) | wall (s) | user CPU (s) | system CPU (s) | CPU-s per s | peak RSS (MiB) | samples/s | target M it/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rate in args.rates:
        target = subprocess.Popen(
            [args.python, CPU4, "--window", f"{args.duration + 3:g}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            target.stdout.readline()  # ready
            target.stdin.write("go\n")
            target.stdin.flush()
            with tempfile.TemporaryDirectory() as tmp:
                report_path = os.path.join(tmp, "report.json")
                started = time.monotonic()
                record = subprocess.Popen(
                    [
                        gilty,
                        "record",
                        "--pid",
                        str(target.pid),
                        "--duration",
                        f"{args.duration:g}",
                        "--rate",
                        f"{rate:g}",
                        "-o",
                        report_path,
                    ],
                    stderr=subprocess.DEVNULL,
                )
                _pid, status, ru = os.wait4(record.pid, 0)
                record.returncode = os.waitstatus_to_exitcode(status)
                wall = time.monotonic() - started
                with open(report_path) as f:
                    report = json.load(f)
            result = json.loads(target.stdout.readline())
            target.wait(10)
        finally:
            if target.poll() is None:
                target.kill()
                target.wait()
        cpu = ru.ru_utime + ru.ru_stime
        print(
            f"| {rate:g} | {wall:.2f} | {ru.ru_utime:.2f} | {ru.ru_stime:.2f} | {cpu / wall:.3f} | {ru.ru_maxrss / 1024:.0f} | "
            f"{report['samples'] / report['duration_s']:.0f} | {result['ips'] / 1e6:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
