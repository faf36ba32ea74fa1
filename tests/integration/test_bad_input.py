"""Bad targets and bad command lines: the right exit status, one `gilty: error:` line, target unharmed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    REPO,
    VENV_GILTY,
    assert_one_error_line,
    discover_unsupported,
    run_gilty,
    settled_state,
)

# Each subcommand with the arguments it needs besides --pid; all of them attach the same way.
SUBCOMMANDS = {
    "dump": ["dump"],
    "record": ["record", "--duration", "1", "--rate", "100"],
    "top": ["top", "--duration", "1"],
    "specialization": ["specialization", "--duration", "1"],
}


def vanished_pid() -> int:
    """A pid that was just used and is free now."""
    child = subprocess.Popen(["true"])
    child.wait()
    assert not Path(f"/proc/{child.pid}").exists()
    return child.pid


@pytest.fixture
def sleep_process():
    proc = subprocess.Popen(["sleep", "100"])
    yield proc
    proc.kill()
    proc.wait()


# Guards: a vanished pid reported as an internal error or traceback instead of "no such process" (3).
@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_no_such_process(command):
    pid = vanished_pid()
    rc, out, err = run_gilty(*SUBCOMMANDS[command], "--pid", pid)
    assert rc == 3, f"exit {rc}; stderr:\n{err}"
    line = assert_one_error_line(err)
    assert str(pid) in line, line
    assert out == "", out


# Guards: a process without an interpreter (`sleep`) treated as Python, crashing the reader, or
# being disturbed by the attempt (stopped, traced, killed).
@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_not_a_python_process(command, sleep_process):
    before = settled_state(sleep_process.pid)
    rc, out, err = run_gilty(*SUBCOMMANDS[command], "--pid", sleep_process.pid)
    assert rc == 4, f"exit {rc}; stderr:\n{err}"
    assert_one_error_line(err)
    assert out == "", out
    assert sleep_process.poll() is None and settled_state(sleep_process.pid) == before


# Guards: a CPython older than 3.10 read with a wrong layout (garbage or a crash) instead of
# being refused as unsupported (5), and the target disturbed by the attempt.
@pytest.mark.interpreter
@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_unsupported_interpreter(command, targets):
    old = discover_unsupported()
    if old is None:
        pytest.skip("no pyenv CPython older than 3.10 (3.9, 3.8, 3.7, 3.6) installed")
    proc = targets(old.path, "known_stack.py")
    before = settled_state(proc.pid)
    rc, out, err = run_gilty(*SUBCOMMANDS[command], "--pid", proc.pid)
    assert rc == 5, f"exit {rc} for Python {old.version_str}; stderr:\n{err}"
    line = assert_one_error_line(err)
    assert old.minor_str in line, f"the message should name the version: {line}"
    assert out == "", out
    assert proc.alive() and settled_state(proc.pid) == before


# Guards: EPERM/EACCES from /proc or process_vm_readv surfacing as an internal error, a traceback,
# or "not a Python process", instead of "permission denied" (6); and the target disturbed.
@pytest.mark.root
@pytest.mark.interpreter
def test_permission_denied_as_nobody(interp, targets):
    proc = targets(interp, "known_stack.py")
    before = settled_state(proc.pid)
    # Drop to nobody inside an already running venv Python: /root (pyenv, the venv's base) is 0700,
    # so gilty is imported and its extension loaded before the switch: the command's module too, by
    # asking the program for the command's help (the CLI imports only the command it runs, when it
    # runs it), and `locale` and `shutil`, which argparse loads late.
    code = (
        "import contextlib, io, os, sys, locale, shutil; import gilty._native; from gilty.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['dump', '--help'])\n"
        "os.setgroups([]); os.setgid(65534); os.setuid(65534); "
        f"sys.exit(main(['dump', '--pid', '{proc.pid}']))"
    )
    python = str(REPO / ".venv" / "bin" / "python") if VENV_GILTY.exists() else sys.executable
    rc, out, err = run_gilty(argv=[python, "-c", code])
    assert rc == 6, f"exit {rc}; stderr:\n{err}"
    assert_one_error_line(err)
    assert out == "", out
    assert proc.alive() and settled_state(proc.pid) == before


# Guards: usage mistakes giving a traceback or a status other than 2.
@pytest.mark.parametrize(
    "args",
    [
        ["record"],  # neither --pid nor a command
        ["record", "--pid", "1", "--", "true"],  # both
        ["record", "--pid", "1", "--duration", "-3"],
        ["record", "--pid", "1", "--rate", "fast"],
        ["dump"],
        ["dump", "--pid", "abc"],
        ["dump", "--pid", "1", "--", "true"],
        ["top", "--pid", "0"],
        ["frobnicate"],
    ],
    ids=lambda a: " ".join(a) or "none",
)
def test_usage_errors(args):
    rc, out, err = run_gilty(*args)
    assert rc == 2, f"exit {rc}; stderr:\n{err}"
    assert_one_error_line(err)


# Guards: `-- CMD` that cannot be started: a traceback instead of one line.
def test_launch_of_missing_command():
    rc, out, err = run_gilty("record", "--duration", "1", "--", "/nonexistent/python3")
    assert rc != 0
    assert_one_error_line(err)
