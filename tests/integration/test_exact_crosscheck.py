"""`gilty record --exact` against an independent tracer: bpftrace on the same functions, same process, same time.

The target is cpu_and_io_threads.py (two I/O threads sleeping 10 ms in a loop beside a CPU spinner:
a steady GIL convoy). bpftrace runs tests/bpftrace/gil_times.bt (uprobes on take_gil entry/return and
drop_gil entry, its own definitions of hold and wait, the same as gilty's); while it is attached,
gilty records `--exact --duration 4 --rate 1000`. As soon as gilty says it is recording, the test
sends the target SIGUSR1: the script's window opens at the target's C signal handler and lasts 4 s,
so both windows start within ~0.1 s of each other. Each tool's totals are compared as fractions of
its own window. Two uprobe sets on the same functions coexist (the kernel chains the consumers).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, gilty_command, gilty_env, note, parse_json, running_target, thread_named

# Alone: bpftrace's uprobes reach every process that maps the library, other tests' targets too.
pytestmark = [pytest.mark.interpreter, pytest.mark.perf, pytest.mark.alone]

BT_SCRIPT = REPO / "tests" / "bpftrace" / "gil_times.bt"
DURATION_S = 4.0
RATE_HZ = 1000
TOLERANCE = 0.01  # fractions of each tool's window (measured agreement: within 0.001)
BT_ATTACH_TIMEOUT_S = 60.0


def skip_reason() -> str:
    if os.geteuid() != 0:
        return "needs root (uprobes for gilty and bpftrace)"
    if shutil.which("bpftrace") is None:
        return "bpftrace is not on PATH (Debian: apt-get install -y bpftrace; `make setup` installs it)"
    if not Path("/sys/bus/event_source/devices/uprobe/type").exists():
        return "kernel has no uprobe PMU"
    return ""


def interpreter_file(pid: int) -> str:
    """The mapped file of ``pid`` that defines take_gil: libpythonX.Y.so for shared builds, else python."""
    paths = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and parts[5] not in paths:
            name = os.path.basename(parts[5])
            if name.startswith("libpython") or name.startswith("python"):
                paths.append(parts[5])
    for path in paths:
        nm = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True).stdout
        if re.search(r"^[0-9a-f]+ [tT] take_gil$", nm, re.M):
            return path
    pytest.skip(
        f"no mapped interpreter file of pid {pid} has the symbol take_gil in its own symbol table, where bpftrace looks ({paths}; a stripped build)"
    )


def read_line(stream, timeout: float) -> bytes:
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout):
            return b""
    return stream.readline()


def parse_bpftrace(stdout: str) -> dict:
    """{"@window_ns": int, "@hold_ns": {tid: ns}, ...} from ``bpftrace -f json`` map lines."""
    maps = {}
    for line in stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("type") == "map":
            for name, value in msg["data"].items():
                maps[name] = {int(k): v for k, v in value.items()} if isinstance(value, dict) else value
    return maps


@pytest.fixture(scope="module")
def both(interp):
    """(gilty's report, bpftrace's maps) for cpu_and_io_threads.py traced by both at once."""
    if interp.id.startswith("debian"):
        pytest.skip("Debian's python3.11 is stripped: neither gilty --exact nor bpftrace can find take_gil")
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with running_target(interp, "cpu_and_io_threads.py") as proc, tempfile.TemporaryDirectory() as tmp:
        lib = interpreter_file(proc.pid)
        script = Path(tmp, "gil_times.bt")
        script.write_text(BT_SCRIPT.read_text().replace("LIBPYTHON", lib).replace("SECONDS", "60"))
        time.sleep(0.3)  # let the convoy settle
        with open(Path(tmp, "bt.err"), "wb") as bt_err_file:
            bt = subprocess.Popen(
                ["bpftrace", "-f", "json", "-p", str(proc.pid), str(script), str(proc.pid), str(int(DURATION_S * 1000))],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=bt_err_file,
            )
        gilty = None
        try:
            first = read_line(bt.stdout, BT_ATTACH_TIMEOUT_S)
            assert b"attached_probes" in first, f"bpftrace did not attach: {first!r}; {Path(tmp, 'bt.err').read_text()}"
            gilty = subprocess.Popen(
                gilty_command()
                + [
                    "record",
                    "--exact",
                    "--pid",
                    str(proc.pid),
                    "--duration",
                    str(DURATION_S),
                    "--rate",
                    str(RATE_HZ),
                    "--format",
                    "json",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=gilty_env(),
            )
            line = read_line(gilty.stderr, 30)
            assert line.startswith(b"gilty: recording"), f"gilty said {line!r}"
            # Sampling starts now (probes in): open bpftrace's window. The handler prints a line we ignore.
            proc.popen.send_signal(signal.SIGUSR1)
            out, err = gilty.communicate(timeout=60)
            assert gilty.returncode == 0, f"gilty exited {gilty.returncode}: {err.decode()}"
            bt_out, _ = bt.communicate(timeout=60)
        finally:
            for p in (gilty, bt):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait(10)
        bt_err = Path(tmp, "bt.err").read_text(errors="replace")
    report = parse_json(out.decode(), "gilty record --exact --format json")
    maps = parse_bpftrace(first.decode() + bt_out.decode())
    assert maps.get("@window_ns"), f"bpftrace's window never opened or closed; stdout {bt_out!r}; stderr {bt_err}"
    return report, maps


def fractions(report: dict, maps: dict) -> dict:
    """{thread name: {"hold": (gilty, bpftrace), "wait": (gilty, bpftrace)}} as fractions of each window."""
    window = maps["@window_ns"]
    out = {}
    for t in report["threads"]:
        e = t["exact"]
        if not e:
            continue
        # bpftrace's wait is all of take_gil; gilty splits off the time in it while no thread held
        # the GIL (the waiter had no CPU yet: `wait_unheld_s`, docs/exact.md), so both parts are summed.
        wall = report["exact_overhead"]["wall_s"]
        out[t["name"]] = {
            "hold": (e["hold_fraction"], maps.get("@hold_ns", {}).get(t["tid"], 0) / window),
            "wait": (e["wait_fraction"] + e["wait_unheld_s"] / wall, maps.get("@wait_ns", {}).get(t["tid"], 0) / window),
        }
    return out


# Guards: exact mode's intervals (pairing of entry/return/drop events per thread, timestamps,
# normalisation by the traced wall time) disagreeing with an independent implementation.
@pytest.mark.parametrize("what", ["hold", "wait"])
def test_gilty_agrees_with_bpftrace(interp, both, what):
    report, maps = both
    got = fractions(report, maps)
    assert set(got) >= {"io1", "io2", "cpu1"}, got.keys()
    note(interp, "xcheck: window gilty/bpftrace", round(report["exact_overhead"]["wall_s"] / (maps["@window_ns"] / 1e9), 4))
    bad = []
    for name in ("io1", "io2", "cpu1"):
        g, b = got[name][what]
        note(interp, f"xcheck {name} {what}: gilty-bpftrace", round(g - b, 4))
        note(interp, f"xcheck {name} {what}: rel diff %", round(100 * (g - b) / b, 1) if b else -1)
        if abs(g - b) > TOLERANCE:
            bad.append(f"{name}: gilty {g:.4f}, bpftrace {b:.4f}")
    assert not bad, f"{what} fractions differ by more than {TOLERANCE}: {bad}"


# Guards: the number of waits seen (events lost or mis-paired, threads not attached).
def test_gilty_counts_as_many_waits_as_bpftrace(interp, both):
    report, maps = both
    window = maps["@window_ns"] / 1e9
    for name in ("io1", "io2", "cpu1"):
        t = thread_named(report, name)
        g = t["exact"]["wait"]["count"] / report["exact_overhead"]["wall_s"]
        b = maps.get("@waits", {}).get(t["tid"], 0) / window
        note(interp, f"xcheck {name}: waits/s gilty/bpftrace", round(g / b, 3) if b else -1)
        assert b > 0 and abs(g - b) <= 0.1 * b + 2, f"{name}: {g:.1f} waits/s by gilty, {b:.1f} by bpftrace"


# Guards: a hold invented at the start of tracing. A thread blocked in take_gil when the probes go
# in gets no take_gil return event (a uretprobe only sees calls entered after it is armed), so its
# first event is drop_gil, and gilty credits it a hold "from the start of tracing" that was really
# the rest of its wait plus the attach itself. bpftrace's longest I/O-thread hold is ~0.05-3 ms.
def test_no_hold_invented_at_attach(interp, both):
    report, maps = both
    gaps = []
    for name in ("io1", "io2"):
        t = thread_named(report, name)
        g = t["exact"]["hold"]["max_s"]
        b = maps.get("@hold_max_ns", {}).get(t["tid"], 0) / 1e9
        note(interp, f"xcheck {name}: longest hold ms gilty", round(g * 1e3, 2))
        note(interp, f"xcheck {name}: longest hold ms bpftrace", round(b * 1e3, 2))
        if g > b + 0.005:
            gaps.append(f"{name}: gilty {g * 1e3:.2f} ms, bpftrace {b * 1e3:.2f} ms")
    assert not gaps, f"longest I/O-thread hold, gilty vs bpftrace: {gaps}"
