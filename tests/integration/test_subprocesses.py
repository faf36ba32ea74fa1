"""`--subprocesses` and several `--pid` on real process trees (issue 7): every Python descendant
recorded with its own threads and functions, late ones included, exits marked, zombies and
non-Python children skipped without failing; and Ctrl-C / SIGTERM ending `top` and `record`
promptly at any rate.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import time

import pytest
from conftest import TARGETS, gilty_command, gilty_env, line_of, parse_json, record_json, run_gilty, running_target

pytestmark = pytest.mark.interpreter


def _one_version(interp) -> None:
    """For behaviour of gilty's own (signals, hints, layout of `top`) that no interpreter changes."""
    if interp.id.startswith("debian") or interp.minor_str != "3.12":
        pytest.skip("does not depend on the target's version: checked on pyenv 3.12 only (suite time)")


def _process(report: dict, pid: int) -> dict:
    found = [p for p in report["processes"] if p["process"]["pid"] == pid]
    assert found, f"pid {pid} not recorded; recorded: {[p['process'] for p in report['processes']]}"
    return found[0]


def _functions(process: dict) -> set:
    return {(f["function"], f["line"]) for t in process["threads"] for f in t["top_functions"]}


# Guards issue 7: `record --pid MASTER` saw only the idle master while the children were busy.
def test_forked_and_spawned_children_are_recorded_with_their_own_functions(interp):
    script = "busy_children.py"
    with running_target(interp, script) as parent:
        report = record_json(parent.pid, duration=2.0, rate=200, extra=("--subprocesses",))
    assert report["subprocesses"] is True
    children = [p for p in report["processes"] if p["process"]["ppid"] == parent.pid]
    assert len(children) == 2, [p["process"] for p in report["processes"]]
    seen = set().union(*(_functions(c) for c in children))
    # The loop's time is split between its two lines (the `for` and its body); either may lead.
    for name in ("forked_spin", "spawned_spin"):
        body = line_of(script, name)
        assert seen & {(name, body), (name, body - 1)}, (name, body, seen)
    for child in children:
        assert child["gil_utilisation"] > 0.5, child["process"]
        assert {t["pid"] for t in child["threads"]} == {child["process"]["pid"]}
    master = _process(report, parent.pid)
    assert master["process"]["role"] == "master"
    assert master["gil_utilisation"] < 0.2
    assert ("parent_wait", line_of(script, "parent_wait")) in _functions(master)


def _until_recording(gilty: subprocess.Popen, then) -> str:
    """Reads gilty's stderr up to its "recording" line, then calls ``then()``; returns what it read."""
    lines = []
    for line in gilty.stderr:
        lines.append(line)
        if line.startswith("gilty: recording"):
            then()
            break
    return "".join(lines)


def _started_epoch(pid: int) -> float:
    """When ``pid`` started, in time.time() seconds: /proc/PID/stat's starttime is boot-clock ticks."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))


def test_a_python_child_started_late_by_a_shell_is_attached(interp):
    # The wrapper is bash (not Python: skipped); its child execs Python 0.5 s after the wrapper is told
    # that gilty records (gilty's start-up takes seconds on a busy machine).
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    wrapper = subprocess.Popen(
        [str(TARGETS / "late_python_child.sh"), interp.path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        assert wrapper.stdout.readline().strip() == b"ready"
        gilty = subprocess.Popen(
            gilty_command() + ["record", "--pid", str(wrapper.pid), "-s", "--duration", "3", "--rate", "200", "--format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=gilty_env(),
        )
        err = _until_recording(gilty, lambda: (wrapper.stdin.write(b"go\n"), wrapper.stdin.flush()))
        out, rest = gilty.communicate(timeout=120)
        err += rest
        # The Python child spins until the wrapper is gone: its own start time is still readable.
        with open(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children") as f:
            kids = [int(k) for k in f.read().split()]
        started = {pid: _started_epoch(pid) for pid in kids}
    finally:
        os.killpg(wrapper.pid, signal.SIGKILL)
        wrapper.wait()
    assert gilty.returncode == 0, err
    report = parse_json(out)
    assert f"skipping pid {wrapper.pid}" in err  # the bash wrapper, said once
    assert err.count(f"skipping pid {wrapper.pid}:") == 1
    # The loop's time is spread over its lines: the function is what identifies the child.
    late = [p for p in report["processes"] if "late_spin" in {f for f, _line in _functions(p)}]
    assert len(late) == 1, [p["process"] for p in report["processes"]]
    info = late[0]["process"]
    assert info["ppid"] == wrapper.pid
    # Its first sample comes after it existed: seconds from the recording's start to the child's own
    # start (/proc/PID/stat), not a fixed delay, which gilty's start-up on a busy machine eats into.
    recording_start = datetime.datetime.fromisoformat(report["start_time"]).timestamp()
    born_s = started[info["pid"]] - recording_start
    print(f"late child: born {born_s:.3f} s into the recording, first sample at {info['first_sample_s']:.3f} s")
    assert born_s > 0, born_s  # the wrapper was told after gilty said it records
    # 0.02 s: starttime counts 10 ms clock ticks
    assert info["first_sample_s"] >= born_s - 0.02, (info, born_s)


def test_zombie_and_non_python_children_are_skipped_without_failing(interp):
    _one_version(interp)  # which children are skipped, and saying so, is gilty's own
    with running_target(interp, "zombie_and_shell_children.py") as parent:
        rc, out, err = run_gilty("record", "--pid", parent.pid, "-s", "--duration", 2, "--format", "json")
    assert rc == 0, err
    assert "Traceback" not in err
    report = parse_json(out)
    assert [p["process"]["pid"] for p in report["processes"]] == [parent.pid]
    reasons = {s["pid"]: s["reason"] for s in report["skipped"]}
    assert len(reasons) == 2, report["skipped"]
    assert any("zombie" in r for r in reasons.values()), reasons
    for pid in reasons:  # each said once on stderr
        assert err.count(f"skipping pid {pid}:") == 1, err


def test_a_child_that_exits_is_marked_not_an_error(interp):
    _one_version(interp)  # a child's exit is seen in /proc; its functions are read per version above
    with running_target(interp, "child_exits_midway.py") as parent:
        gilty = subprocess.Popen(
            gilty_command()
            + ["record", "--pid", str(parent.pid), "-s", "--duration", "2.5", "--rate", "200", "--format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=gilty_env(),
        )
        # The child is forked once gilty says it records (its start-up takes seconds on a busy machine).
        err = _until_recording(gilty, lambda: parent.popen.send_signal(signal.SIGUSR1))
        out, rest = gilty.communicate(timeout=120)
        err += rest
    assert gilty.returncode == 0, err
    report = parse_json(out)
    child = [p for p in report["processes"] if p["process"]["ppid"] == parent.pid]
    assert len(child) == 1, [p["process"] for p in report["processes"]]
    info = child[0]["process"]
    # Its exit comes after its first sample and inside the recording.
    assert info["exited"] is True and info["first_sample_s"] < info["exited_at_s"] < report["duration_s"], (
        info,
        report["duration_s"],
    )
    # The loop spends its time on two lines (the test and the add): the function is what counts.
    assert "short_spin" in {f for f, _line in _functions(child[0])}
    assert report["partial"] is False  # the parent lived on


def test_several_pids_are_all_recorded(interp):
    _one_version(interp)  # one reader per process: each version's reader is checked by the tests above
    with running_target(interp, "spinners.py") as a, running_target(interp, "sleeper.py") as b:
        # 200 passes asked for each; 50 is the floor (40 % of them on a busy machine is 80).
        report = record_json(a.pid, duration=1.0, rate=200, extra=("--pid", b.pid))
    assert sorted(p["process"]["pid"] for p in report["processes"]) == sorted([a.pid, b.pid])
    assert report["subprocesses"] is False
    assert all(p["samples"] > 50 for p in report["processes"])


def test_hint_without_subprocesses_when_children_do_the_work(interp):
    _one_version(interp)
    with running_target(interp, "busy_children.py") as parent:
        report = record_json(parent.pid, duration=2.0, rate=100)
        rc, out, err = run_gilty("record", "--pid", parent.pid, "--duration", 1.5)
    assert any("--subprocesses" in h for h in report["hints"]), report["hints"]
    assert len(report["processes"]) == 1
    assert rc == 0 and "hint:" in err and "--subprocesses" in out


def test_top_with_subprocesses_fits_80_columns_and_24_lines(interp):
    _one_version(interp)
    with running_target(interp, "busy_children.py") as parent:
        rc, out, err = run_gilty("top", "--pid", parent.pid, "-s", "--duration", 2.2, timeout=30)
    assert rc == 0, err
    frames = [f for f in out.split("\n\n") if f.startswith("gilty top:")]
    assert frames, out
    for frame in frames:
        lines = frame.splitlines()
        assert len(lines) <= 24 and max(map(len, lines)) <= 80, frame
    assert "forked_spin" in frames[-1] and "spawned_spin" in frames[-1], frames[-1]


@pytest.fixture(scope="module")
def parked_sleeper(interp):
    """One sleeping target for all the stop-signal cases of an interpreter."""
    _one_version(interp)
    with running_target(interp, "sleeper.py") as target:
        yield target


def _caught_signals(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))


def _wait_until_sampling(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Returns once gilty catches SIGTERM (its stop handlers are installed just before its sampling
    loop starts) and then two of the loop's chunks (0.25 s each) have begun: the signal lands in the
    loop however long gilty's start-up took on a busy machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if _caught_signals(proc.pid) & (1 << (signal.SIGTERM - 1)):
                time.sleep(0.5)
                return
        except (OSError, StopIteration):
            break
        time.sleep(0.05)
    proc.kill()
    _out, err = proc.communicate()
    pytest.fail(f"gilty did not start sampling within {timeout:g} s (exit {proc.returncode}): {err.decode(errors='replace')}")


# Guards issue 7: `top --rate 0.01` ended 38 s after SIGINT (0.1 is now the lowest rate). A hang check, not a timing benchmark.
@pytest.mark.parametrize("command", [["top"], ["top", "-s"], ["record"], ["record", "-s"]])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stop_signal_ends_promptly_at_a_very_low_rate(interp, parked_sleeper, command, sig):
    target = parked_sleeper
    proc = subprocess.Popen(
        gilty_command() + [command[0], "--pid", str(target.pid), "--rate", "0.1", *command[1:]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=gilty_env(),
    )
    _wait_until_sampling(proc)
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"gilty {' '.join(command)} --rate 0.1 did not stop within 10 s of {sig.name}")
    took = time.monotonic() - sent
    assert took < 3.0, f"took {took:.1f} s"
    assert proc.returncode in (0, 7), proc.returncode


# Guards: `record -s -- CMD` tried the command's own process once, at t=0, before its interpreter
# was initialised ("has not initialised its Python interpreter yet"), and never again: a
# multiprocessing parent was lost, and with only a quick child gone before any pass gilty exited 4.
def test_the_command_itself_is_attached_once_its_interpreter_is_initialised(interp):
    script = "mp_quick_child.py"
    # Whether t=0 falls before the interpreter is initialised depends on timing (before the fix about
    # one run in three exited 4): four runs, each of which must record the parent.
    for _ in range(4):
        rc, out, err = run_gilty(
            "record", "--subprocesses", "--rate", 200, "--format", "json", "--", interp.path, TARGETS / script, "0.5"
        )
        assert rc == 0, f"gilty record exited {rc}; stderr:\n{err}"
        report = parse_json(out, "gilty record -s --format json")
        assert "not initialised" not in err and "no Python thread state" not in err, err
        parents = [p for p in report["processes"] if ("parent_work", line_of(script, "parent_work")) in _functions(p)]
        assert len(parents) == 1, [(p["process"], sorted(_functions(p))) for p in report["processes"]]
