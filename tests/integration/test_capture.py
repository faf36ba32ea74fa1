"""The one capture loop (gilty.sampling.capture) on a real target: Ctrl-C, SIGTERM and the target's
exit each end it as what they are, promptly, with what was collected kept; a duration ends it on
time; a `-- CMD` it started is stopped at the end, whatever ended the run. Every command's loop is
this one, so these are checked here once (pyenv 3.12: nothing version-specific is read).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import TARGETS, gilty_env, one_version

# A process that records like a command does: attach (or start `-- CMD` and attach to it), sample in
# the capture loop until it ends, print how it ended. Its stdout says "sampling" once the stop handler
# is installed, then one JSON line.
DRIVER = """
import json, sys
from gilty import _native
from gilty.sampling import capture, launch

mode, what, duration = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
duration = None if duration == "-" else float(duration)
got = {"samples": 0}
with capture.Stop() as stop:
    with capture.Command(what if mode == "cmd" else None) as command:
        if command.process is not None:
            target = launch.attach_to_command(_native, command.process, what, stop=stop)
        else:
            target = _native.Target(int(what[0]))
        sampler = _native.Sampler(target, 100.0)

        def step(seconds):
            try:
                batch = sampler.collect(seconds)
            except _native.GiltyError as e:
                if getattr(e, "kind", None) != "target_exited":
                    raise
                return True
            got["samples"] += len(batch["times"])
            return bool(batch.get("exited"))

        print("sampling", flush=True)
        ended = capture.collect_until(step, 0.01, duration, stop)
child = command.process.pid if command.process is not None else None
print(json.dumps({"stopped_by": ended.stopped_by, "wall_s": ended.wall_s, "samples": got["samples"],
                  "signum": stop.signum, "child": child, "child_status": command.status}), flush=True)
"""


def start_driver(*args) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=gilty_env(),
    )
    line = proc.stdout.readline()
    if line.strip() != b"sampling":
        proc.kill()
        _out, err = proc.communicate()
        pytest.fail(f"the driver did not start sampling: {line!r}\n{err.decode(errors='replace')}")
    return proc


def ended(proc: subprocess.Popen, timeout: float = 15.0) -> dict:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the capture loop did not end within {timeout:g} s")
    assert proc.returncode == 0, err.decode(errors="replace")
    return json.loads(out)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_signal_ends_the_loop_as_an_interrupt_keeping_what_was_collected(interp, targets, sig):
    one_version(interp, "the loop's ending, not a read of the interpreter")
    target = targets(interp, "sleeper.py")
    proc = start_driver("pid", target.pid, "-")
    time.sleep(0.6)
    sent = time.monotonic()
    proc.send_signal(sig)
    result = ended(proc)
    took = time.monotonic() - sent
    assert result["stopped_by"] == "interrupt" and result["signum"] == sig
    assert result["samples"] > 0  # the slice under way when the signal came is kept
    # One slice (0.25 s) and the driver's exit; generous for a loaded 2-CPU machine.
    assert took < 3.0, f"took {took:.1f} s"
    assert target.alive()  # stopping gilty never stops a target it only attached to


def test_the_targets_exit_ends_the_loop(interp, targets):
    one_version(interp, "the loop's ending, not a read of the interpreter")
    target = targets(interp, "exits_soon.py", "30")
    proc = start_driver("pid", target.pid, "-")
    time.sleep(0.5)
    target.popen.send_signal(signal.SIGUSR1)  # ends 0.5 s later
    target.popen.wait(timeout=10)
    result = ended(proc)
    assert result["stopped_by"] == "target_exit" and result["signum"] is None
    assert result["samples"] > 0


def test_a_duration_ends_the_loop_on_time(interp, targets):
    one_version(interp, "the loop's ending, not a read of the interpreter")
    target = targets(interp, "sleeper.py")
    result = ended(start_driver("pid", target.pid, 1.0))
    assert result["stopped_by"] == "duration"
    assert 0.99 <= result["wall_s"] < 1.5
    # 100 Hz for a second: a pass scheduled at most every 10 ms, none past the end.
    assert 50 <= result["samples"] <= 101


def test_a_started_command_is_stopped_when_the_user_stops(interp):
    one_version(interp, "process lifecycle, not a read of the interpreter")
    proc = start_driver("cmd", interp.path, TARGETS / "sleeper.py", "-")
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    result = ended(proc)
    assert result["stopped_by"] == "interrupt"
    assert result["child_status"] is not None  # reaped, with the status it died with
    assert not _alive(result["child"])


def test_a_started_command_that_exits_ends_the_loop_with_its_status(interp):
    one_version(interp, "process lifecycle, not a read of the interpreter")
    proc = start_driver("cmd", interp.path, TARGETS / "exits_soon.py", "1.0", "-")
    result = ended(proc)
    assert result["stopped_by"] == "target_exit"
    assert result["child_status"] == 0 and result["samples"] > 0


def test_the_hand_off_returns_the_calls_result_or_raises_its_error_and_asks_it_to_stop_once():
    from gilty.sampling import capture

    class UserStop:
        requested = False

    stop, asked = UserStop(), []

    def slow():
        while not asked:
            time.sleep(0.01)
        return "stopped early"

    def ask():
        asked.append(True)

    stop.requested = True  # Ctrl-C came: the call is asked once to end
    assert capture.wait_for(slow, stop, ask, "gilty-test") == "stopped early"
    assert asked == [True]

    def fails():
        raise ValueError("bad plan")

    running = capture.in_thread(fails, "gilty-test")
    assert running.done.wait(5)
    with pytest.raises(ValueError, match="bad plan"):
        running.result()
