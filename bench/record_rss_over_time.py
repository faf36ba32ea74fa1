"""gilty record's RSS over a long recording, read from outside every few seconds.

    .venv/bin/python bench/record_rss_over_time.py --rate 1000 --duration 300 [--every 10] \\
        [--python PATH] [--tree DIR] [--json FILE] [-- EXTRA RECORD ARGS]

Starts bench/targets/mixed32.py (32 threads: 4 spinning, 27 napping 1-5 ms, the main thread
waiting), runs ``gilty record --pid PID --rate R --duration D -o OUT.json`` against it and reads
VmRSS and VmHWM of the recording process from /proc every 0.25 s until it exits (the report's
writing included, to within 0.25 s). Prints a line every --every seconds (seconds since start,
RSS, peak so far), then the peak, the RSS at 60 s and last, and the report's "timeline" (whether
and how far it was coarsened).
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
REPO = os.path.dirname(HERE)
MIXED32 = os.path.join(HERE, "targets", "mixed32.py")
GILTY = os.path.join(REPO, ".venv", "bin", "gilty")
DEFAULT_PYTHON = "/root/.pyenv/versions/3.12.1/bin/python3"


def rss_mib(pid: int) -> tuple | None:
    """(VmRSS, VmHWM) of ``pid`` in MiB, or None once it is gone."""
    found = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    found[line[:5]] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return (found["VmRSS"], found["VmHWM"]) if len(found) == 2 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--python", default=DEFAULT_PYTHON)
    parser.add_argument("--json", metavar="FILE", help="also write the readings here")
    parser.add_argument(
        "--tree",
        metavar="DIR",
        help="run `python -m gilty` from this python/ tree (with its built "
        "_native) instead of .venv/bin/gilty, e.g. an older commit's copy",
    )
    parser.add_argument("extra", nargs="*", help="more `gilty record` arguments (after --)")
    args = parser.parse_args()

    target = subprocess.Popen([args.python, MIXED32], stdout=subprocess.PIPE, text=True)
    out_dir = tempfile.mkdtemp(prefix="gilty-rss-")
    out = os.path.join(out_dir, "r.json")
    readings = []
    hwm = 0.0
    try:
        ready = target.stdout.readline()
        if not ready.startswith("ready"):
            raise SystemExit(f"target did not start: {ready!r}")
        gilty = [sys.executable, "-m", "gilty"] if args.tree else [GILTY]
        cmd = [
            *gilty,
            "record",
            "--pid",
            str(target.pid),
            "--rate",
            f"{args.rate:g}",
            "--duration",
            f"{args.duration:g}",
            "-o",
            out,
            *args.extra,
        ]
        start = time.monotonic()
        env = dict(os.environ, PYTHONPATH=os.path.abspath(args.tree)) if args.tree else None
        rec = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        next_print = 0.0
        while rec.poll() is None:
            time.sleep(0.25)  # often, so that the peak of writing the report is seen
            value = rss_mib(rec.pid)
            if value is None:
                continue
            hwm = max(hwm, value[1])
            t = time.monotonic() - start
            if t >= next_print:
                readings.append((round(t, 1), value[0]))
                print(f"{t:8.1f} s  RSS {value[0]:7.1f} MiB  peak {hwm:7.1f} MiB", flush=True)
                next_print += args.every
        err = rec.stderr.read()
        if rec.returncode != 0:
            raise SystemExit(f"gilty record failed (exit {rec.returncode}): {err.strip()[-500:]}")
    finally:
        target.terminate()
        target.wait(timeout=30)
    with open(out) as f:
        report = json.load(f)
    os.unlink(out)
    os.rmdir(out_dir)
    past60 = [r for r in readings if r[0] >= 60.0]
    summary = {
        "rate_hz": args.rate,
        "duration_s": args.duration,
        "samples": report.get("samples"),
        "peak_rss_mib": hwm,  # VmHWM as last read, at most 0.25 s before the recorder exited
        "rss_at_60s_mib": past60[0][1] if past60 else None,
        "rss_last_mib": readings[-1][1],
        "timeline": report.get("timeline"),
        "readings": readings,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "readings"}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
