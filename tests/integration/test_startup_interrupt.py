"""A Ctrl-C that lands in `record -s`'s start-up, after its signal handlers are in place but before the
first pass: issue 31, item 14. The loop then never ran, no process had been reported to the recording,
and gilty said `error: no Python process found in pid N or its descendants` (exit 4) of a live Python
process: an interrupted scan read as "nothing found". It must end as an interrupt, as the other
start-up Ctrl-C cases do.

test_hard_stops' start-up trial hits that moment by chance (it lasts well under a millisecond). Here
gilty's stderr is a pipe the test has filled, so its first line (the running line, printed after the
handlers are in place and before the loop) blocks; the Ctrl-C comes while it does, then the pipe is
drained.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import gilty_command, gilty_env, one_version


def _catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


def _writing_stderr(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return fields[:2] == ["1", "0x2"]  # write(2, ...)


def _full_pipe() -> tuple:
    """(read end, write end, bytes in it): a pipe whose next write blocks."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    filled = 0
    try:
        while True:
            filled += os.write(w, b"." * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    return r, w, filled


def test_ctrl_c_before_the_first_pass_of_record_s_is_an_interrupt(interp, targets, tmp_path):
    one_version(interp, "the CLI's start-up reads nothing version-specific")
    target = targets(interp, "known_stack.py")
    out = tmp_path / "r.json"
    argv = [*gilty_command(), "record", "-s", "--pid", str(target.pid), "--duration", "60", "-o", str(out)]
    r, w, filled = _full_pipe()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w, env=gilty_env(), cwd=str(tmp_path)
    )
    os.close(w)
    try:
        deadline = time.monotonic() + 30
        while not (_catches_sigterm(proc.pid) and _writing_stderr(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, "gilty never blocked on its first line"
            time.sleep(0.001)
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.2)  # the interrupted write runs the handler and blocks again
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        proc.wait(timeout=30)
    finally:
        os.close(r)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = data[filled:].decode("utf-8", "replace")
    assert text.startswith("gilty: recording pid"), text
    assert "no Python process found" not in text, text
    assert proc.returncode == 130, f"exit {proc.returncode}: {text}"
    assert "gilty: interrupted" in text, text
    assert "Traceback" not in text, text
    assert not out.exists()
    assert target.alive()
