"""gilty's memory over a long recording: peak RSS of the recording process, per storage variant.

    .venv/bin/python bench/record_memory.py --rate 100 --duration 600 \\
        [--variant before=/tmp/gilty-before] [--variant after=python] [--python PATH] [--json FILE]

Starts bench/targets/mixed32.py (32 threads: 4 spinning, 27 napping 1-5 ms, the main thread
waiting; or --target demo, the bundled demo service), then runs one recording process per ``--variant NAME=DIR`` *at the same time*, against
the same target, so the variants see the same load and their ratios come from one run. Each
recording process imports ``gilty`` from DIR (a ``python/`` tree with its built ``_native``), runs
the loop `gilty record` runs (``sample_until_stopped``: ``collect(0.25)`` merged into a
``Session``) for --duration, then the analysis and the JSON report.

Reported per variant (VmHWM/VmRSS from /proc/self/status of the recording process):

  samples, achieved_hz     sampling passes, and passes per second
  hwm_attach_mib           peak RSS of attaching (reading the interpreter's ELF symbols), which
                           is then reset (clear_refs), so the peaks below are those of sampling
  rss_start_mib            RSS after attaching, before sampling
  hwm_recorded_mib         peak RSS from then until recording ended (before analysis)
  hwm_reported_mib         peak RSS once the analysis and the JSON report were done as well
  stored                   what the Session holds: rows (row storage) or runs/count keys/blame keys
  runs_per_s, bytes_per_run (aggregated storage) the growth rate of the only unbounded part
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MIXED32 = os.path.join(HERE, "targets", "mixed32.py")
DEFAULT_PYTHON = "/root/.pyenv/versions/3.12.1/bin/python3"
MIB = 1024 * 1024
# Target commands after the interpreter; each prints a line starting with "ready" once running.
TARGETS = {"mixed32": [MIXED32], "demo": ["-m", "gilty.demo.service"]}


def proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def mib(field: str) -> float:
    return round(proc_status_kib(field) * 1024 / MIB, 1)


def reset_peak() -> bool:
    """Start VmHWM afresh (Linux 4.0+: writing 5 to clear_refs), so the attach spike is not the peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class NeverStop:
    requested = False


def stored_shape(session) -> dict:
    """What the session keeps, whichever storage the imported gilty has."""
    if hasattr(session, "row_tid"):  # the per-sample rows gilty kept before native aggregation
        return {"rows": len(session.row_tid)}
    from gilty.sampling.session import ThreadRuns

    return {
        "runs": session.run_count,
        "bytes_per_run": ThreadRuns.bytes_per_run(),
        "count_keys": len(session.counts),
        "blame_keys": len(session.blame),
    }


def child(pid: int, rate: float, duration: float) -> int:
    """The recording process: attach, record like `gilty record`, analyse, report."""
    from gilty import _native
    from gilty.report.recording import json as json_report
    from gilty.sampling.analysis import summarise
    from gilty.sampling.record_run import sample_until_stopped
    from gilty.sampling.session import Session, TargetInfo

    target = _native.Target(pid)
    session = Session(TargetInfo.from_native(target), rate)
    sampler = _native.Sampler(target, rate)
    hwm_attach = mib("VmHWM")
    peak_was_reset = reset_peak()
    rss_start = mib("VmRSS")
    sample_until_stopped(session, sampler, duration, NeverStop(), _native.GiltyError, _native.syscall_name)
    hwm_recorded = mib("VmHWM")
    rss_recorded = mib("VmRSS")
    summarise(session)
    report = json_report.render(session)
    hwm_reported = mib("VmHWM")
    shape = stored_shape(session)
    out = {
        "samples": session.samples,
        "achieved_hz": round(session.samples / session.duration_s, 1) if session.duration_s else 0.0,
        "late": session.errors["late"],
        "duration_s": round(session.duration_s, 1),
        "hwm_attach_mib": hwm_attach,
        "peak_reset_after_attach": peak_was_reset,
        "rss_start_mib": rss_start,
        "rss_recorded_mib": rss_recorded,
        "hwm_recorded_mib": hwm_recorded,
        "hwm_reported_mib": hwm_reported,
        "report_bytes": len(report),
        "stored": shape,
    }
    if "runs" in shape and session.duration_s:
        out["runs_per_s"] = round(shape["runs"] / session.duration_s, 1)
    print(json.dumps(out), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--python", default=DEFAULT_PYTHON, help=f"target interpreter (default {DEFAULT_PYTHON})")
    parser.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="mixed32",
        help="mixed32 (default), or the bundled demo service (6 threads, python -m gilty.demo.service)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        metavar="NAME=DIR",
        help="a gilty python/ tree to import (repeatable; default: this checkout's python/)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results here")
    parser.add_argument("--child", type=int, metavar="PID", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child, args.rate, args.duration)

    variants = [v.split("=", 1) for v in (args.variant or [f"this={os.path.join(REPO, 'python')}"])]
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))  # the demo service is in gilty's tree
    target = subprocess.Popen([args.python, *TARGETS[args.target]], stdout=subprocess.PIPE, text=True, env=env)
    try:
        ready = target.stdout.readline()
        if not ready.startswith("ready"):
            raise SystemExit(f"target did not start: {ready!r}")
        procs = []
        for name, path in variants:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
            cmd = [
                sys.executable,
                __file__,
                "--child",
                str(target.pid),
                "--rate",
                f"{args.rate:g}",
                "--duration",
                f"{args.duration:g}",
            ]
            procs.append((name, path, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)))
        results = []
        for name, path, proc in procs:
            out, _ = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"variant {name} failed (exit {proc.returncode})")
            results.append({"variant": name, "path": path, **json.loads(out.strip().splitlines()[-1])})
    finally:
        target.terminate()
        target.wait(timeout=30)

    print(f"rate {args.rate:g} Hz, {args.duration:g} s, {args.target} on {args.python}, variants run side by side")
    print(
        "| variant | samples | passes/s | peak RSS attaching (MiB) | RSS at start (MiB) | peak RSS recording (MiB) "
        "| peak RSS with report (MiB) | stored |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        stored = ", ".join(f"{k} {v}" for k, v in r["stored"].items())
        if "runs_per_s" in r:
            stored += f", runs/s {r['runs_per_s']}"
        print(
            f"| {r['variant']} | {r['samples']} | {r['achieved_hz']} | {r['hwm_attach_mib']} | {r['rss_start_mib']} | "
            f"{r['hwm_recorded_mib']} | {r['hwm_reported_mib']} | {stored} |"
        )
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            grown = lambda x: x["hwm_recorded_mib"] - x["rss_start_mib"]  # noqa: E731
            print(
                f"{r['variant']} / {base['variant']}: peak RSS recorded {r['hwm_recorded_mib'] / base['hwm_recorded_mib']:.2f}, "
                f"growth while recording {grown(r) / grown(base) if grown(base) else float('nan'):.3f}"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
