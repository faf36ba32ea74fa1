"""Where perf events are refused, the commands that need them say so in one line and stop; nothing
falls back silently and the target is untouched.

The tests run as root, where perf_event_open is always allowed, so the refusal is made real with a
seccomp filter (tests/targets/deny_perf/deny_perf.c, built with gcc): perf_event_open returns EACCES
in gilty's process, as it does in a container whose seccomp profile leaves it out or for a user
without CAP_PERFMON under kernel.perf_event_paranoid. Everything else gilty does still works there.
"""

from __future__ import annotations

import subprocess

import pytest
from conftest import gilty_command, gilty_env, one_version

pytestmark = pytest.mark.interpreter


def _refused(deny_perf: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [deny_perf, *gilty_command(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=gilty_env(),
    )


def _one_line_refusal(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, (done.returncode, done.stderr)
    line = lines[0]
    assert line.startswith("gilty: error: ") and "Traceback" not in done.stderr, line
    # What to change: the capability, the sysctl and the container's seccomp profile.
    assert "CAP_PERFMON" in line and "kernel.perf_event_paranoid=" in line and "seccomp" in line, line
    return line


def _check_env(interp) -> None:
    one_version(interp, "the refusal comes before any version-specific read")


def test_dump_native_refused_says_what_to_change(interp, targets, deny_perf):
    _check_env(interp)
    target = targets(interp, "cpu_and_io_threads.py")
    done = _refused(deny_perf, "dump", "--native", "--pid", str(target.pid))
    line = _one_line_refusal(done)
    assert "perf events are not permitted" in line, line
    # Nothing printed as if it were a native stack.
    assert not done.stdout.strip(), done.stdout
    assert target.popen.poll() is None, "the target died"
    # Without --native the same process is read as before: the refusal was perf's alone.
    plain = _refused(deny_perf, "dump", "--pid", str(target.pid))
    assert plain.returncode == 0 and f"Process {target.pid}" in plain.stdout, plain.stderr


def test_record_exact_refused_says_what_to_change(interp, targets, deny_perf):
    _check_env(interp)
    target = targets(interp, "cpu_and_io_threads.py")
    done = _refused(deny_perf, "record", "--exact", "--pid", str(target.pid), "--duration", "1", "--format", "json")
    line = _one_line_refusal(done)
    assert "without --exact" in line, line
    assert not done.stdout.strip(), done.stdout
    assert target.popen.poll() is None, "the target died"
