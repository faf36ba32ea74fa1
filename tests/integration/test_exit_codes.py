"""Every status of docs/cli.md's "Errors and exit status" table, produced by a real run of the command
the table names, with one stderr line and no traceback (issue 30: five commands gave 4 for a Python
2.7 target, `serve --pid 2` gave 3 and `memory --pid 2` gave 7, `load` gave 8 on Ctrl-C and 1 for a
server that never answered, `--rate 0.01` was taken).

PRODUCED_BY names, per status, the tests that produce it: the ones here, and the ones of other
modules that already did (kept there, beside what else they check). A status added to the table
without a test fails ``test_every_status_in_the_table_is_produced``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    AVAILABLE,
    REPO,
    VENV_GILTY,
    assert_one_error_line,
    free_port,
    gilty_command,
    gilty_env,
    pyenv_root,
    run_gilty,
    running_target,
)

HERE = Path(__file__).name
PRODUCED_BY = {
    "0": [
        "test_ci_gates.py::test_a_gate_that_does_not_hold_keeps_exit_0",
        "test_load.py::test_ctrl_c_ends_the_run_with_a_partial_report",
    ],
    "1": [f"{HERE}::test_1_internal_error_without_the_native_extension"],
    "2": [f"{HERE}::test_2_usage_error", "test_bad_input.py::test_usage_errors"],
    "3": [f"{HERE}::test_3_no_such_process", "test_bad_input.py::test_no_such_process"],
    "4": [f"{HERE}::test_4_kernel_thread_is_not_python", "test_bad_input.py::test_not_a_python_process"],
    "5": [f"{HERE}::test_5_python_2_is_unsupported"],
    "6": ["test_bad_input.py::test_permission_denied_as_nobody"],
    "7": [f"{HERE}::test_7_load_server_exits_before_answering"],
    "8": ["test_launch_and_exit.py::test_pid_target_exiting_mid_record_gives_partial_result"],
    "9": [f"{HERE}::test_9_exact_without_perf_events"],
    "10": ["test_ci_gates.py::test_a_gate_that_holds_fails_the_run_and_names_the_thread"],
    "11": ["test_load.py::test_connection_refused_is_counted_by_kind"],
    "12": [f"{HERE}::test_12_load_server_never_answers"],
    "CMD's": ["test_ci_gates.py::test_record_of_a_command_exits_with_its_status"],
    "130": [f"{HERE}::test_130_ctrl_c_while_waiting_for_a_command"],
}

# The commands that attach to a running process by --pid, with what else each needs.
ATTACHING = {
    "dump": ["dump"],
    "record": ["record", "--duration", "1", "--rate", "100"],
    "top": ["top", "--duration", "1"],
    "specialization": ["specialization", "--duration", "1"],
    "memory": ["memory", "--duration", "1"],
    "serve": ["serve", "--port"],  # a free port is added per run
}
PF_KTHREAD = 0x00200000


def _table_statuses() -> list:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("## Errors and exit status", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| ([^|]+?) \| ", section, re.M) if m.group(1) not in ("status", "---")]


def _argv(command: str, pid: int) -> list:
    argv = list(ATTACHING[command])
    if command == "serve":
        argv.append(str(free_port()))
    return argv + ["--pid", str(pid)]


def _one_line(rc: int, want: int, err: str, what: str) -> str:
    assert rc == want, f"{what}: exit {rc}, expected {want}; stderr:\n{err}"
    return assert_one_error_line(err)


def _kernel_thread() -> int:
    """A kernel thread's pid (kthreadd is 2 on the host's pid namespace); skips where none is seen."""
    for entry in sorted(os.listdir("/proc"), key=lambda e: (len(e), e)):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2 :].split()[6]) & PF_KTHREAD:
            return int(entry)
    pytest.skip("no kernel thread visible in this pid namespace")


def _vanished_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _descendant_named(root: int, name: str):
    """A process named ``name`` under ``root``, or None."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = (int(stat[stat.rfind(")") + 2 :].split()[1]), stat[stat.find("(") + 1 : stat.rfind(")")])
    for pid, (_ppid, comm) in parents.items():
        up, seen = pid, 0
        while up in parents and seen < 64:
            up, seen = parents[up][0], seen + 1
            if up == root and comm == name:
                return pid
    return None


def test_every_status_in_the_table_is_produced():
    statuses = _table_statuses()
    assert "0" in statuses and "130" in statuses, statuses  # the table was found
    assert set(statuses) == set(PRODUCED_BY), f"table {statuses}, tests for {sorted(PRODUCED_BY)}"
    for status, tests in PRODUCED_BY.items():
        for ref in tests:
            module, name = ref.split("::")
            source = (Path(__file__).parent / module).read_text(encoding="utf-8")
            assert f"def {name}(" in source, f"status {status}: no test {ref}"


def test_1_internal_error_without_the_native_extension(tmp_path):
    # The package without its extension, as before `make setup`: one line naming the fix, exit 1.
    shutil.copytree(REPO / "python" / "gilty", tmp_path / "gilty", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    python = str(REPO / ".venv" / "bin" / "python") if VENV_GILTY.exists() else sys.executable
    env = dict(gilty_env(), PYTHONPATH=str(tmp_path))
    done = subprocess.run(
        [python, "-m", "gilty", "dump", "--pid", str(os.getpid())],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=str(tmp_path),
    )
    line = _one_line(done.returncode, 1, done.stderr, "dump without the extension")
    assert "make setup" in line, line


@pytest.mark.parametrize(
    "args",
    [
        ["record", "--pid", "1", "--rate", "0.01"],  # issue 30: taken, though the docs say 0.1-20,000 Hz
        ["top", "--pid", "1", "--rate", "0.09"],
        ["serve", "--pid", "1", "--rate", "0.01"],
        ["specialization", "--pid", "1", "--rate", "20001"],
        ["record", "--pid", "1", "--", "true"],
    ],
    ids=" ".join,
)
def test_2_usage_error(args):
    rc, _out, err = run_gilty(*args)
    _one_line(rc, 2, err, " ".join(args))


@pytest.mark.parametrize("command", ["memory", "serve"])
def test_3_no_such_process(command):
    pid = _vanished_pid()
    rc, out, err = run_gilty(*_argv(command, pid))
    line = _one_line(rc, 3, err, command)
    assert str(pid) in line and out == "", line


# Issue 30: `serve --pid 2` said "no process" (3) and `memory --pid 2` "exited" (7) of a live kernel thread.
@pytest.mark.parametrize("command", ATTACHING)
def test_4_kernel_thread_is_not_python(command):
    pid = _kernel_thread()
    rc, out, err = run_gilty(*_argv(command, pid), timeout=30)
    line = _one_line(rc, 4, err, f"{command} of kernel thread {pid}")
    assert "not a Python process" in line and out == "", line


def test_4_dump_of_a_tree_without_python_is_an_error():
    # `dump -s` of a process tree with no Python in it printed nothing and exited 0.
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        rc, out, err = run_gilty("dump", "--pid", sleeper.pid, "--subprocesses", timeout=30)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert rc == 4 and out == "" and "Traceback" not in err, (rc, err)
    assert err.splitlines()[-1] == f"gilty: error: no Python process found in pid {sleeper.pid} or its descendants", err


@pytest.fixture(scope="module")
def python2():
    found = sorted(pyenv_root().glob("versions/2.*/bin/python2.?"))
    if not found:
        pytest.skip("no pyenv Python 2 installed (pyenv install 2.7.18)")
    proc = subprocess.Popen(
        [str(found[-1]), "-c", "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(600)"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout.readline().strip() == b"ready"
    yield proc
    proc.kill()
    proc.wait()


# Issue 30: dump, record, top, specialization and serve called Python 2.7 "not a Python process" (4);
# serve said it served first. memory measures any process tree, Python 2 included (exit 0).
@pytest.mark.parametrize("command", ["dump", "record", "top", "specialization", "serve"])
def test_5_python_2_is_unsupported(command, python2):
    rc, out, err = run_gilty(*_argv(command, python2.pid), timeout=30)
    line = _one_line(rc, 5, err, f"{command} of Python 2")
    assert "Python 2.7" in line and "not support" in line and out == "", line
    assert python2.poll() is None


def _load_server(*server: str, timeout: float = 120) -> subprocess.CompletedProcess:
    argv = [*gilty_command(), "load", f"http://127.0.0.1:{free_port()}/", "--rate", "5", "--duration", "1", "--", *server]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=gilty_env(), stdin=subprocess.DEVNULL)


def test_7_load_server_exits_before_answering():
    done = _load_server("sh", "-c", "exit 3")
    line = _one_line(done.returncode, 7, done.stderr, "load -- a server that exits")
    assert "exited with status 3" in line, line


# Issue 30: a server that never answered was an internal error (1).
def test_12_load_server_never_answers():
    done = _load_server("sleep", "120")
    line = _one_line(done.returncode, 12, done.stderr, "load -- a server that never answers")
    assert "did not answer" in line, line


def test_9_exact_without_perf_events(deny_perf):
    interp = next((i for i in AVAILABLE if i.minor_str == "3.12" and not i.id.startswith("debian")), None)
    if interp is None:
        pytest.skip("pyenv Python 3.12 not installed")
    with running_target(interp, "sleeper.py") as target:
        done = subprocess.run(
            [deny_perf, *gilty_command(), "record", "--exact", "--pid", str(target.pid), "--duration", "1"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env=gilty_env(),
        )
        _one_line(done.returncode, 9, done.stderr, "record --exact without perf events")
        assert done.stdout == "" and target.alive()


def _interrupt_once_started(argv: list, child: str, wait_s: float) -> tuple:
    """Run gilty, Ctrl-C it as soon as ``child`` runs under it; (returncode, stderr) or a skip when
    gilty gave up waiting first (a machine too busy to start it within ``wait_s``)."""
    proc = subprocess.Popen(
        [*gilty_command(), *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=gilty_env()
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and _descendant_named(proc.pid, child) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    err = err.decode(errors="replace")
    if proc.returncode not in (130,) and "after" in err and f"{wait_s:g} s" in err:
        pytest.skip(f"gilty stopped waiting before the Ctrl-C arrived: {err.strip()}")
    return proc.returncode, out.decode(errors="replace"), err


# The table's case (`-- CMD` not yet running Python), and load's wait for its server (issue 30: the
# Ctrl-C was only seen after the 30 s wait).
@pytest.mark.parametrize(
    "argv, child, wait_s",
    [
        (["record", "--", "sleep", "120"], "sleep", 5),
        (["load", "URL", "--rate", "5", "--", "sleep", "120"], "sleep", 30),
    ],
    ids=["record -- CMD", "load -- SERVER"],
)
def test_130_ctrl_c_while_waiting_for_a_command(argv, child, wait_s):
    argv = [f"http://127.0.0.1:{free_port()}/" if a == "URL" else a for a in argv]
    rc, out, err = _interrupt_once_started(argv, child, wait_s)
    assert rc == 130, f"exit {rc}; stderr:\n{err}"
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("gilty: ") and "interrupted" in lines[0], err
    assert out == ""
