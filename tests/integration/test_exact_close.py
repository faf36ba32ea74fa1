"""`gilty record --exact` takes its probes out of the target right after the report, exits without
waiting for the kernel's slow probe removal, and leaves no probe definition behind, also when killed.

The probes are named uprobes in tracefs, anchored by a keeper process (crates/gilty-trace, tracefs.rs
and keeper.rs; docs/exact.md, "Removing the probes"). The reference is the uprobe PMU path
(GILTY_TRACE_PMU=1) on the same target in the same test: there every perf event carries its own probe,
whose removal costs the kernel one slow unregister per probe and thread. The named path must beat what
that path spends on a single probe across the target's threads.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import gilty_command, gilty_env, note, task_ids
from test_exact import INT3, first_byte, function_address, pyenv_interp, wait_for_line  # noqa: F401 (fixture)

# Alone: it reads the target's code for breakpoints, which another test's uprobes on the same library
# (bpftrace's reach every process mapping it) would put there.
pytestmark = [pytest.mark.interpreter, pytest.mark.perf, pytest.mark.alone]

PROBED = ("take_gil", "drop_gil", "gc_collect_main")
PROBES = 6  # entry and return of each
UPROBE_EVENTS = Path("/sys/kernel/tracing/uprobe_events")
DURATION_S = 1.0
# Failure deadlines only (a hang), never the measure: the assertions compare with the reference.
HANG_S = 120


def gilty_entries(gilty_pid: int) -> list:
    """This gilty's probe definitions in uprobe_events (its groups are gilty_<pid>_<n>)."""
    try:
        text = UPROBE_EVENTS.read_text()
    except OSError:
        return []
    return re.findall(rf"^[pr]:gilty_{gilty_pid}_\d+/\S+", text, re.M)


def tracefs_command(line: str) -> None:
    """Appends one command to uprobe_events (never truncating it: that would delete every probe)."""
    fd = os.open(UPROBE_EVENTS, os.O_WRONLY | os.O_APPEND)  # open(..., "a") seeks, which tracefs refuses
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def probed(pid: int, addrs: list) -> bool:
    """Whether any probed function of ``pid`` starts with int3 (entry and return probes both put it there)."""
    return any(first_byte(pid, a) == INT3 for a in addrs)


def poll_until(pred, limit: float = HANG_S):
    """monotonic time when pred() first held (polled every 2 ms); fails after ``limit`` s (a hang)."""
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < limit, f"still not so after {limit} s: {pred}"
        time.sleep(0.002)
    return time.monotonic()


def start_gilty(pid: int, duration: float, pmu: bool, **popen) -> subprocess.Popen:
    env = gilty_env()
    env.pop("GILTY_TRACE_PMU", None)
    if pmu:
        env["GILTY_TRACE_PMU"] = "1"
    cmd = gilty_command() + [
        "record",
        "--exact",
        "--pid",
        str(pid),
        "--duration",
        str(duration),
        "--rate",
        "200",
        "--format",
        "json",
    ]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, **popen)


def attached(gilty: subprocess.Popen, pid: int, addrs: list) -> bool:
    """Waits until gilty records (its probes enabled); True if it used named probes."""
    poll_until(lambda: probed(pid, addrs) or gilty.poll() is not None)
    assert gilty.poll() is None, f"gilty exited {gilty.returncode}: {gilty.stderr.read().decode()}"
    wait_for_line(gilty.stderr, b"gilty: recording", time.monotonic() + HANG_S)
    return bool(gilty_entries(gilty.pid))


def record(pid: int, addrs: list, pmu: bool) -> dict:
    """One record: seconds from the complete report to gilty's exit, to the int3s gone, to its probe
    definitions gone; and whether named probes were used."""
    gilty = start_gilty(pid, DURATION_S, pmu, stdout=subprocess.PIPE)
    try:
        named = attached(gilty, pid, addrs)
        buf, fd = b"", gilty.stdout.fileno()
        while True:  # the report is written when what came so far parses
            chunk = os.read(fd, 1 << 16)
            assert chunk, f"gilty ended without a report: {gilty.stderr.read().decode()}"
            buf += chunk
            try:
                report = json.loads(buf)
                break
            except ValueError:
                continue
        report_at = time.monotonic()
        gone_at = poll_until(lambda: not probed(pid, addrs))
        gilty.wait(HANG_S)
        exit_at = time.monotonic()
        clean_at = poll_until(lambda: not gilty_entries(gilty.pid))
    finally:
        if gilty.poll() is None:
            gilty.kill()
            gilty.wait()
        gilty.stdout.close()
        gilty.stderr.close()
    assert gilty.returncode == 0
    return {
        "named": named,
        "threads": report["exact_overhead"]["threads_attached"],
        "exit": exit_at - report_at,
        "gone": gone_at - report_at,
        "clean": clean_at - report_at,
    }


def named_or_skip(run: dict) -> None:
    """Skips where gilty cannot use named probes (no tracefs, and not root to mount it); fails if it
    fell back to the uprobe PMU although tracefs is there."""
    if not run["named"]:
        if not UPROBE_EVENTS.exists():
            pytest.skip(f"no tracefs at {UPROBE_EVENTS.parent} (gilty mounts it only as root): uprobe PMU used")
        pytest.fail(f"gilty used the uprobe PMU although {UPROBE_EVENTS} exists")


# Guards: gilty's exit waiting seconds for the kernel to remove its probes (threads x probes x ~0.1 s),
# and the target keeping its int3s all that time after the report.
def test_exit_after_report_does_not_wait_for_probe_removal(pyenv_interp, targets):
    if pyenv_interp.minor_str != "3.12":
        pytest.skip("kernel behaviour, checked on pyenv 3.12 only (suite time)")
    proc = targets(pyenv_interp, "exact_seven_threads.py")
    assert len(task_ids(proc.pid)) == 7
    addrs = [function_address(proc.pid, f) for f in PROBED]
    original = [first_byte(proc.pid, a) for a in addrs]
    assert INT3 not in original
    ref = record(proc.pid, addrs, pmu=True)
    run = record(proc.pid, addrs, pmu=False)
    named_or_skip(run)
    # The PMU path removes threads x probes private probes one after another after the report.
    per_close = ref["exit"] / (ref["threads"] * PROBES)
    one_probe = ref["threads"] * per_close
    for key in ("exit", "gone", "clean"):
        note(pyenv_interp, f"close: report to {key}, PMU, s", round(ref[key], 3))
        note(pyenv_interp, f"close: report to {key}, named, s", round(run[key], 3))
    note(pyenv_interp, "close: PMU per-close cost, s", round(per_close, 3))
    assert run["threads"] == ref["threads"] == 7, (run, ref)
    assert run["exit"] < one_probe, f"named: exit {run['exit']:.3f} s after the report; PMU: {per_close:.3f} s a close"
    assert run["gone"] < one_probe, f"named: int3 gone {run['gone']:.3f} s after the report; PMU: {per_close:.3f} s a close"
    assert run["exit"] < DURATION_S
    # The keeper pays one slow removal per probe, after gilty's exit: less than the PMU path for all threads.
    assert run["clean"] < ref["exit"], (run, ref)
    assert [first_byte(proc.pid, a) for a in addrs] == original
    assert proc.alive(), proc.stderr_text()


# Guards: a killed gilty leaving its probes in the target, or their definitions in uprobe_events.
def test_sigkill_removes_probes_and_definitions(pyenv_interp, targets):
    if pyenv_interp.minor_str != "3.12":
        pytest.skip("kernel behaviour, checked on pyenv 3.12 only (suite time)")
    proc = targets(pyenv_interp, "exact_seven_threads.py")
    addrs = [function_address(proc.pid, f) for f in PROBED]
    original = [first_byte(proc.pid, a) for a in addrs]

    def killed(pmu: bool) -> dict:
        gilty = start_gilty(proc.pid, 600, pmu, stdout=subprocess.DEVNULL)
        try:
            named = attached(gilty, proc.pid, addrs)
            entries = gilty_entries(gilty.pid)
            kill_at = time.monotonic()
            gilty.send_signal(signal.SIGKILL)
            gone_at = poll_until(lambda: not probed(proc.pid, addrs))
            gilty.wait(HANG_S)
            clean_at = poll_until(lambda: not gilty_entries(gilty.pid))
        finally:
            if gilty.poll() is None:
                gilty.kill()
                gilty.wait()
            gilty.stderr.close()
        return {"named": named, "entries": len(entries), "gone": gone_at - kill_at, "clean": clean_at - kill_at}

    # Reference: the kernel closing a killed gilty's PMU events, threads x probes slow removals.
    ref = killed(pmu=True)
    run = killed(pmu=False)
    named_or_skip(run)
    threads = len(task_ids(proc.pid))
    per_close = ref["gone"] / (threads * PROBES)
    note(pyenv_interp, "close: SIGKILL to int3 gone, PMU, s", round(ref["gone"], 3))
    note(pyenv_interp, "close: SIGKILL to int3 gone, named, s", round(run["gone"], 3))
    note(pyenv_interp, "close: SIGKILL to definitions gone (named), s", round(run["clean"], 3))
    assert run["entries"] == PROBES, run
    # gilty's events close at once (the keeper's anchors are the probes' last events): the int3s go
    # before the PMU path would have removed one probe from every thread.
    assert run["gone"] < threads * per_close, (run, ref, per_close)
    # The keeper then closes its anchor per probe (one slow removal each) and deletes the definitions:
    # PROBES slow removals against the reference's threads x PROBES.
    assert run["clean"] < ref["gone"], (run, ref)
    assert proc.alive(), proc.stderr_text()
    assert [first_byte(proc.pid, a) for a in addrs] == original


# Guards: definitions left by a gilty that died with its keeper piling up in uprobe_events.
def test_stale_definitions_of_dead_gilty_are_removed(pyenv_interp, targets):
    if pyenv_interp.minor_str != "3.12":
        pytest.skip("tracefs bookkeeping, checked on pyenv 3.12 only (suite time)")
    if not UPROBE_EVENTS.exists():
        pytest.skip(f"no tracefs at {UPROBE_EVENTS.parent}")
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can have this pid
    live = os.getpid()  # this test process is not gilty, but its pid is alive: left alone
    path = os.path.realpath(pyenv_interp.path)
    stale = [f"p:gilty_{dead}_0/p0_take_gil {path}:0x0", f"p:gilty_{live}_0/p0_take_gil {path}:0x0"]
    for line in stale:
        tracefs_command(line)
    try:
        proc = targets(pyenv_interp, "exact_seven_threads.py")
        # Long enough that the poll below sees the probes even when other jobs hold the CPUs for a while
        # (a 1 s record ended unseen beside eight CPU hogs); what is checked happens at gilty's start.
        gilty = start_gilty(proc.pid, 4 * DURATION_S, pmu=False, stdout=subprocess.DEVNULL)
        try:
            addrs = [function_address(proc.pid, f) for f in PROBED]
            named = attached(gilty, proc.pid, addrs)
            gilty.wait(HANG_S)
        finally:
            if gilty.poll() is None:
                gilty.kill()
                gilty.wait()
            gilty.stderr.close()
        named_or_skip({"named": named})
        assert gilty.returncode == 0
        assert not gilty_entries(dead), UPROBE_EVENTS.read_text()
        assert gilty_entries(live), UPROBE_EVENTS.read_text()
    finally:
        for pid in (dead, live):
            try:
                tracefs_command(f"-:gilty_{pid}_0/p0_take_gil")
            except OSError:
                pass  # already gone
