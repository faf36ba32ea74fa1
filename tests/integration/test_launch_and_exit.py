"""`gilty record -- CMD` (launch mode) and a `--pid` target exiting in the middle of a recording."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pytest
from conftest import TARGETS, gilty_command, gilty_env, one_version, parse_json, run_gilty, thread_named
from timing_reference import Pressure, assert_unless_busy

pytestmark = pytest.mark.interpreter

SHORT_TARGET = "exits_soon.py"  # runs ~1.5 s (or argv[1] s), then exits 0; SIGUSR1: exits argv[2] s later
# For --pid: the target would run this long, but is told (SIGUSR1) to end 1 s after gilty says it
# records: gilty has attached before the target leaves however long its start-up took.
PID_TARGET_RUN_S = "60"
PID_TARGET_LEFT_S = "1"


def record_until_target_exits(proc) -> tuple:
    """``gilty record --pid --duration 10`` on ``proc``, which is told to exit once gilty records;
    (exit status, stdout, stderr, seconds from gilty's start to its end)."""
    started = time.monotonic()
    gilty = subprocess.Popen(
        gilty_command() + ["record", "--pid", str(proc.pid), "--duration", "10", "--rate", "200", "--format", "json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gilty_env(),
    )
    err = []
    for line in gilty.stderr:
        err.append(line)
        if line.startswith("gilty: recording pid"):
            proc.popen.send_signal(signal.SIGUSR1)
            break
    try:
        out, rest = gilty.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        gilty.kill()
        gilty.communicate()
        pytest.fail(f"gilty did not end within 30 s of a target that exits; stderr: {''.join(err)}")
    return gilty.returncode, out, "".join(err) + rest, time.monotonic() - started


# Guards: launch mode not finding the Python process it started, not stopping when the command
# exits (hanging until a timeout), or reporting the natural end of the command as an error.
@pytest.mark.alone  # a time limit, and the spinner's share of the GIL
def test_launch_mode_records_until_the_command_exits(interp):
    argv = [interp.path, str(TARGETS / SHORT_TARGET)]
    pressure = Pressure()
    started = time.monotonic()
    rc, out, err = run_gilty("record", "--rate", 200, "--format", "json", "--", *argv, timeout=60)
    elapsed = time.monotonic() - started
    assert rc == 0, f"exit {rc}; stderr:\n{err}"
    assert "Traceback" not in err, err
    report = parse_json(out)
    # The command spins 1.5 s by its own clock; gilty ends with it, not at some later timeout.
    assert_unless_busy(elapsed < 10, pressure, f"gilty took {elapsed:.1f} s for a 1.5 s command")
    assert report["command"] == argv, report["command"]
    assert report["partial"] is False and report["stopped_by"] == "target_exit", report
    assert 0.5 <= report["duration_s"] <= elapsed, (report["duration_s"], elapsed)
    assert report["samples"] >= 50, report["samples"]
    spinner = thread_named(report, "short-spinner")
    # The only runnable thread: it holds the GIL, with or without a CPU (cpu_wait on a busy host).
    held = spinner["states"]["holding_gil"] + (spinner.get("cpu_wait_holding_gil") or 0.0)
    assert held >= 0.5, spinner["states"]
    assert report["target"]["python_version"].startswith(interp.minor_str), report["target"]


# Guards: a target that exits before --duration ends: the result must be printed and marked
# partial (exit 8), not lost, not passed off as complete, and without a traceback.
def test_pid_target_exiting_mid_record_gives_partial_result(interp, targets):
    one_version(interp, "a target's exit is seen in /proc, not read from the interpreter")
    proc = targets(interp, SHORT_TARGET, PID_TARGET_RUN_S, PID_TARGET_LEFT_S)
    # Reap the target as soon as it exits, as a real parent would (no zombie left for gilty to see).
    reaper = threading.Thread(target=proc.popen.wait, daemon=True)
    reaper.start()
    rc, out, err, _took = record_until_target_exits(proc)
    assert rc == 8, f"exit {rc}; stderr:\n{err}"
    assert "Traceback" not in err, err
    report = parse_json(out)
    assert report["partial"] is True, report
    assert report["stopped_by"] == "target_exit", report["stopped_by"]
    assert report["partial_reason"] and str(proc.pid) in report["partial_reason"], report["partial_reason"]
    assert 1 <= report["duration_s"] < 6, report["duration_s"]
    assert report["samples"] > 0
    assert thread_named(report, "short-spinner")["samples"] > 0
    lines = err.splitlines()
    assert all(line.startswith("gilty:") for line in lines), err
    # Exactly one line tells the user the result is partial (a "recording pid ..." banner may precede it).
    partial_lines = [line for line in lines if "partial" in line.lower()]
    assert len(partial_lines) == 1, err
    assert not any(line.startswith("gilty: error:") for line in lines), err


# Guards: same as above, for a target whose parent has not reaped it yet (a zombie: /proc/PID exists
# but has no memory): gilty must still notice the exit instead of sampling a ghost until --duration.
def test_zombie_target_counts_as_exited(interp, targets):
    one_version(interp, "a zombie is seen in /proc, not read from the interpreter")
    proc = targets(interp, SHORT_TARGET, PID_TARGET_RUN_S, PID_TARGET_LEFT_S)
    rc, out, err, took = record_until_target_exits(proc)
    assert rc == 8, f"exit {rc}; stderr:\n{err}"
    assert took < 9
    assert parse_json(out)["partial"] is True


# Guards: a thread's Python name replaced by the OS thread name ("python3") once threading has left
# sys.modules during interpreter shutdown: the report must keep the name the thread had all along.
def test_thread_names_survive_interpreter_shutdown(interp):
    argv = [interp.path, str(TARGETS / "slow_shutdown.py")]
    rc, out, err = run_gilty("record", "--rate", 200, "--format", "json", "--", *argv, timeout=30)
    assert rc == 0, f"exit {rc}; stderr:\n{err}"
    report = parse_json(out)
    assert [t["name"] for t in report["threads"]] == ["MainThread"], [(t["tid"], t["name"]) for t in report["threads"]]
    # The shutdown second is in the recording: the slow __del__ is among the main thread's functions
    # (qualified on every version: 3.10 takes the class from `self`).
    functions = {f["function"] for f in report["threads"][0]["top_functions"]}
    assert "SlowToDie.__del__" in functions, functions
