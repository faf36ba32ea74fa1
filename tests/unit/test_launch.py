"""Starting `-- CMD`, finding its descendants, and stopping it (real processes, no sampler)."""

import os
import signal
import subprocess
import sys
import time

import pytest
from gilty._errors import CommandError
from gilty.sampling import capture, launch

FAST_STEPS = ((signal.SIGINT, 0.3), (signal.SIGTERM, 0.3), (signal.SIGKILL, None))


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is as good as gone
    except FileNotFoundError:
        return False


def _wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_child_pids_finds_grandchildren_nearest_first():
    child = launch.start_command(["sh", "-c", "sh -c 'sleep 30' & sleep 30 & wait"])
    try:
        assert _wait_for(lambda: len(launch.child_pids(child.pid)) >= 3)
        found = launch.child_pids(child.pid)
        direct = [p for p in found if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1] == str(child.pid)]
        assert set(found[: len(direct)]) == set(direct)  # breadth-first
    finally:
        launch.terminate(child, FAST_STEPS)


def test_terminate_reaches_the_whole_group():
    child = launch.start_command(["sh", "-c", "sleep 30 & wait"])
    assert _wait_for(lambda: launch.child_pids(child.pid))
    grandchild = launch.child_pids(child.pid)[0]
    launch.terminate(child, FAST_STEPS)
    assert child.returncode is not None
    assert _wait_for(lambda: not _alive(grandchild))


def test_terminate_escalates_when_sigint_is_ignored():
    code = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('ready', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert child.stdout.readline() == b"ready\n"
    started = time.monotonic()
    status = launch.terminate(child, FAST_STEPS)
    assert status == -signal.SIGTERM
    assert time.monotonic() - started >= 0.3


def test_terminate_leaves_an_exited_child_alone():
    child = launch.start_command(["true"])
    child.wait()
    assert launch.terminate(child, FAST_STEPS) == 0


def test_start_command_missing_binary():
    with pytest.raises(CommandError) as raised:
        launch.start_command(["/nonexistent/gilty-test-binary"])
    assert raised.value.exit_code == 2


def test_stop_signals_turn_sigterm_into_a_flag():
    with capture.Stop() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert _wait_for(lambda: stop.requested, 1.0)
        assert stop.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
