"""Sample a pid with gilty the way `gilty record` does, and report what it cost (JSON on stdout).

    .venv/bin/python bench/gilty_sampler.py --pid PID --rate HZ --duration S

Attaches (``_native.Target``), creates a ``Sampler``, then loops ``collect(0.25)`` and merges
every batch into a ``Session`` (``gilty.sampling.record_run`` does the same), until --duration or the
target exits. Prints "attached" when sampling starts, then one JSON object:

  samples, achieved_hz   sampling passes and passes per second of wall time
  late                   slots skipped because a pass overran its period (Batch["late"])
  runs                   runs (a thread's stretch of passes in one state) the session holds
  cpu_s, cpu_share       this process's user+sys CPU time while sampling, and per wall second
  attach_cpu_s           CPU time to attach (Target + Sampler), before sampling
  runq_wait_s, off_cpu_s the sampling thread's time waiting for a CPU, and sleeping/blocked
  pass_ms_p50/p99        interval between consecutive passes (the schedule's jitter)
  errors                 torn / failed reads

No analysis or rendering: what is measured is the recording itself.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def schedstat() -> tuple:
    """(on-CPU s, waiting-on-a-runqueue s) of this (main) thread, from /proc/self/schedstat."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            run_ns, wait_ns, _slices = f.read().split()
        return int(run_ns) / 1e9, int(wait_ns) / 1e9
    except (OSError, ValueError):
        return 0.0, 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--chunk", type=float, default=0.25, help="seconds per collect() call (the CLI uses 0.25)")
    args = parser.parse_args()

    from gilty import _native
    from gilty.sampling.session import Session, TargetInfo

    c0 = cpu_seconds()
    target = _native.Target(args.pid)
    session = Session(TargetInfo.from_native(target), args.rate)
    sampler = _native.Sampler(target, args.rate)
    c1 = cpu_seconds()
    print("attached", flush=True)

    w0 = time.monotonic()
    s0 = schedstat()
    exited = False
    while True:
        remaining = args.duration - (time.monotonic() - w0)
        if remaining <= 0:
            break
        try:
            batch = sampler.collect(min(args.chunk, remaining))
        except _native.GiltyError as e:
            if getattr(e, "kind", None) == "target_exited":
                exited = True
                break
            raise
        session.add_batch(batch, _native.syscall_name)
        if batch.get("exited"):
            exited = True
            break
    wall = time.monotonic() - w0
    c2 = cpu_seconds()
    s1 = schedstat()

    times = session.times
    gaps = sorted((b - a) * 1000 for a, b in zip(times, times[1:]))

    def pct(p: float):
        return round(gaps[min(len(gaps) - 1, int(p * len(gaps)))], 3) if gaps else None

    # Achieved rate over the span actually sampled (first to last pass), not the tail after exit.
    span = times[-1] - times[0] if len(times) > 1 else wall
    print(
        json.dumps(
            {
                "rate": args.rate,
                "samples": len(times),
                "wall_s": wall,
                "achieved_hz": (len(times) - 1) / span if len(times) > 1 else 0.0,
                "late": session.errors["late"],
                "runs": session.run_count,
                "threads_seen": len(session.tids()),
                "cpu_s": c2 - c1,
                "cpu_share": (c2 - c1) / wall if wall > 0 else None,
                "attach_cpu_s": c1 - c0,
                # The sampling thread's time runnable but not running (waiting for a CPU), and
                # the rest of the wall time that is neither running nor runnable (sleeping or
                # blocked, e.g. between passes or inside a read).
                "runq_wait_s": s1[1] - s0[1],
                "off_cpu_s": wall - (s1[0] - s0[0]) - (s1[1] - s0[1]),
                "pass_ms_p50": pct(0.50),
                "pass_ms_p99": pct(0.99),
                "errors": {k: v for k, v in session.errors.items() if k != "late"},
                "exited": exited,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
