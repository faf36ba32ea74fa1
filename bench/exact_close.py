"""How long `gilty record --exact` leaves its probes in the target after the report, and how long it
takes to exit; the same after SIGKILL of gilty.

    .venv/bin/python bench/exact_close.py [--python PATH] [--duration 2] [--rounds 3]

Each round runs both probe paths: "named" (tracefs probes and their keeper, the default) and "pmu"
(GILTY_TRACE_PMU=1, the uprobe PMU, one private probe per event and thread: what gilty did before).
Target: tests/targets/exact_seven_threads.py (7 threads). Probes are seen from outside, read only: the first
byte of take_gil, drop_gil and gc_collect_main in the target (/proc/PID/mem; an entry or return probe
puts an int3 there) and gilty's entries in /sys/kernel/tracing/uprobe_events. Times are from the moment
the JSON report is complete on gilty's stdout (normal run) or from the SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
GILTY = os.path.join(REPO, ".venv", "bin", "gilty")
TARGET = os.path.join(REPO, "tests", "targets", "exact_seven_threads.py")  # the one test_exact_close.py uses
UPROBE_EVENTS = "/sys/kernel/tracing/uprobe_events"
FUNCTIONS = ("take_gil", "drop_gil", "gc_collect_main")
INT3 = 0xCC


def function_addresses(pid: int) -> list[int]:
    """Addresses of FUNCTIONS in the mapped interpreter file of ``pid`` (nm + the LOAD segments)."""
    maps = []
    for line in open(f"/proc/{pid}/maps").read().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            maps.append((lo, hi, parts[1], int(parts[2], 16), parts[5]))
    for path in dict.fromkeys(m[4] for m in maps):
        if not re.match(r"(lib)?python", os.path.basename(path)):
            continue
        nm = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True).stdout
        values = {}
        for fn in FUNCTIONS:
            m = re.search(rf"^([0-9a-f]+) [tT] {fn}$", nm, re.M)
            if m:
                values[fn] = int(m.group(1), 16)
        if len(values) != len(FUNCTIONS):
            continue
        segs = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
        loads = [
            tuple(int(x, 16) for x in s.groups())
            for s in re.finditer(
                r"^\s*LOAD\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+0x[0-9a-f]+\s+0x([0-9a-f]+)", segs, re.M
            )
        ]
        out = []
        for value in values.values():
            off = next(value - vaddr + foff for foff, vaddr, memsz in loads if vaddr <= value < vaddr + memsz)
            out.append(
                next(
                    lo + off - moff
                    for lo, hi, perms, moff, mpath in maps
                    if mpath == path and "x" in perms and moff <= off < moff + (hi - lo)
                )
            )
        return out
    raise SystemExit(f"no mapped interpreter file of {pid} defines {FUNCTIONS}")


def probed(pid: int, addrs: list[int]) -> bool:
    with open(f"/proc/{pid}/mem", "rb") as f:
        for a in addrs:
            f.seek(a)
            if f.read(1)[0] == INT3:
                return True
    return False


def gilty_entries(gilty_pid: int) -> int:
    try:
        text = open(UPROBE_EVENTS).read()
    except OSError:
        return 0
    return len(re.findall(rf"^[pr]:gilty_{gilty_pid}\D", text, re.M))


def wait_until(pred, limit: float) -> float | None:
    """Seconds until pred() is true (polled every 2 ms), None if not within limit."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.002)
    return None


def start_target(python: str):
    proc = subprocess.Popen([python, TARGET], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("ready")
    return proc


def gilty_env(path: str) -> dict:
    env = dict(os.environ)
    env.pop("GILTY_TRACE_PMU", None)
    if path == "pmu":
        env["GILTY_TRACE_PMU"] = "1"
    return env


def normal_run(python: str, duration: float, path: str) -> dict:
    target = start_target(python)
    try:
        addrs = function_addresses(target.pid)
        assert not probed(target.pid, addrs)
        gilty = subprocess.Popen(
            [
                GILTY,
                "record",
                "--exact",
                "--pid",
                str(target.pid),
                "--duration",
                str(duration),
                "--rate",
                "1000",
                "--format",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=gilty_env(path),
        )
        wait_until(lambda: probed(target.pid, addrs), 30)
        buf = b""
        report_at = None
        fd = gilty.stdout.fileno()
        while True:  # the report is complete when what came so far parses as JSON
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            buf += chunk
            try:
                json.loads(buf)
            except ValueError:
                continue
            report_at = time.monotonic()
            break
        assert report_at is not None, gilty.stderr.read().decode()
        res = {"probes_gone_s": None, "exit_s": None, "uprobe_events_clean_s": None}
        done = {}

        def exit_watch():
            gilty.wait()
            done["exit"] = time.monotonic() - report_at

        w = threading.Thread(target=exit_watch)
        w.start()
        res["probes_gone_s"] = wait_until(lambda: not probed(target.pid, addrs), 120)
        w.join(180)
        res["exit_s"] = done.get("exit")
        res["uprobe_events_clean_s"] = round(
            time.monotonic() - report_at + (wait_until(lambda: gilty_entries(gilty.pid) == 0, 60) or float("nan")), 3
        )
        res["rc"] = gilty.returncode
        res["target_alive"] = target.poll() is None
        return res
    finally:
        target.kill()
        target.wait()


def killed_run(python: str, path: str) -> dict:
    target = start_target(python)
    try:
        addrs = function_addresses(target.pid)
        gilty = subprocess.Popen(
            [GILTY, "record", "--exact", "--pid", str(target.pid), "--duration", "60", "--format", "json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=gilty_env(path),
        )
        wait_until(lambda: probed(target.pid, addrs), 30)
        time.sleep(1.0)
        killed = time.monotonic()
        gilty.send_signal(signal.SIGKILL)
        res = {}
        res["probes_gone_s"] = wait_until(lambda: not probed(target.pid, addrs), 120)
        gilty.wait()
        res["reaped_s"] = round(time.monotonic() - killed, 3)
        clean = wait_until(lambda: gilty_entries(gilty.pid) == 0, 60)
        res["uprobe_events_clean_s"] = None if clean is None else round(time.monotonic() - killed, 3)
        res["target_alive"] = target.poll() is None
        return res
    finally:
        target.kill()
        target.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12"))
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows = {}
    for _ in range(args.rounds):
        for path in ("pmu", "named"):
            for kind, run in (
                ("normal", lambda: normal_run(args.python, args.duration, path)),  # noqa: B023 - called within its iteration
                ("sigkill", lambda: killed_run(args.python, path)),  # noqa: B023
            ):
                rows.setdefault((path, kind), []).append(run())
                print(f"{path:5} {kind:7}", rows[(path, kind)][-1], flush=True)
    for (path, kind), rs in rows.items():
        for key in rs[0]:
            vals = [r[key] for r in rs if isinstance(r[key], float)]
            if vals:
                print(f"{path:5} {kind:8} {key:24} median {statistics.median(vals):7.3f}  [{min(vals):.3f}, {max(vals):.3f}]")


if __name__ == "__main__":
    main()
