"""`gilty dump --core`: a core file of a hung process read as the live process was (docs/core-files.md).

Per version, one core of the deadlock target: every thread's state, name and stack (function, file,
line) equal to a live `gilty dump` of the same moment (the target is parked: its threads only wait),
and the deadlock named. On pyenv 3.12: a GIL-held hang named as such, and bad input (not a core, a
truncated one, a core of another program, a core whose interpreter is gone) as one line.

pyenv and Debian cores are written by gdb's `gcore`. The sid interpreters' cores are the kernel's own
(SIGQUIT with a core limit, as systemd-coredump gets them): sid's glibc guards thread stacks with
guard regions (`gu` in smaps' VmFlags), and gdb 13's gcore zero-fills a whole mapping it cannot read
in one go, so every thread stack but the main one's comes out as zeros (docs/core-files.md).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    DEBIAN_PYTHON,
    SID_MINORS,
    TARGETS,
    assert_one_error_line,
    line_of,
    note,
    one_version,
    parse_json,
    run_gilty,
    start_target,
    thread_named,
)

GCORE = shutil.which("gcore")


def _live_dump_when(pid: int, ready, timeout: float = 10.0) -> dict:
    """The live JSON dump, once ``ready(report)`` holds (the target has reached its parking place)."""
    deadline = time.monotonic() + timeout
    while True:
        rc, out, err = run_gilty("dump", "--pid", pid, "--format", "json")
        assert rc == 0, err
        report = parse_json(out)
        if ready(report):
            return report
        if time.monotonic() > deadline:
            pytest.fail(f"the target never reached its parking place: {report}")
        time.sleep(0.1)


def _gcore(pid: int, directory: Path) -> tuple:
    """gcore's core of ``pid`` (the target stops for the copy, then runs on): path, seconds taken."""
    if GCORE is None:
        pytest.skip("gdb's gcore is not installed (apt-get install gdb)")
    started = time.monotonic()
    done = subprocess.run([GCORE, "-o", str(directory / "core"), str(pid)], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    path = directory / f"core.{pid}"
    assert done.returncode == 0 and path.exists(), done.stdout + done.stderr
    return path, took


def _kernel_core(interpreter: str, script: str, directory: Path, ready) -> tuple:
    """The kernel's core of the target (SIGQUIT with RLIMIT_CORE raised, written as ``core`` in its
    working directory: core_pattern "core"), after its live dump and a gcore core of it: (live
    report, path, seconds, gcore's core)."""
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if pattern != "core":
        pytest.skip(f"kernel cores go elsewhere here (core_pattern {pattern!r}); the test reads ./core")

    def allow_core() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    proc = subprocess.Popen(
        [interpreter, str(TARGETS / script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=str(directory),
        preexec_fn=allow_core,
    )
    try:
        assert proc.stdout.readline().strip() == b"ready"
        live = _live_dump_when(proc.pid, ready)
        gdb_core = _gcore(proc.pid, directory)[0] if GCORE else None
        started = time.monotonic()
        proc.send_signal(signal.SIGQUIT)
        proc.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    path = directory / "core"
    assert path.exists(), f"no kernel core in {directory}: {os.listdir(directory)}"
    return live, path, took, gdb_core


def _threads(report: dict) -> dict:
    return {
        t["tid"]: (t["name"], t["state"], [(f["function"], f["file"], f["line"]) for f in t["stack"]]) for t in report["threads"]
    }


def _check_gcore_with_guard_regions(core: Path, live: dict) -> None:
    """sid's glibc guards thread stacks with guard regions, which gdb 13's gcore writes out as zeros
    (docs/core-files.md): the main thread reads as live, the other either as live (a gcore that
    reads around guard pages) or with its stack said unread, never a wrong stack."""
    rc, out, err = run_gilty("dump", "--core", core, "--format", "json")
    assert rc == 0, err
    from_core = parse_json(out)
    threads, expected = _threads(from_core), _threads(live)
    assert threads[live["target"]["pid"]] == expected[live["target"]["pid"]]
    other = thread_named(from_core, "other")
    if threads[other["tid"]] != expected[other["tid"]]:
        assert other["stack"] == [] and "do not chain up" in other["stack_error"], other


def _deadlocked(report: dict) -> bool:
    main, other = line_of("deadlock.py", "main_waits"), line_of("deadlock.py", "other_waits")
    lines = {t["name"]: t["stack"][0]["line"] if t["stack"] else None for t in report["threads"]}
    states = {t["state"] for t in report["threads"]}
    return lines.get("MainThread") == main and lines.get("other") == other and states == {"idle"}


def test_core_dump_equals_live_dump_and_names_the_deadlock(interp, tmp_path):
    if interp.minor_str in SID_MINORS and not interp.id.startswith("pyenv"):
        live, core, took, gdb_core = _kernel_core(interp.path, "deadlock.py", tmp_path, _deadlocked)
        how = "kernel"
        if gdb_core is not None:
            _check_gcore_with_guard_regions(gdb_core, live)
    else:
        target = start_target(interp.path, "deadlock.py")
        try:
            live = _live_dump_when(target.pid, _deadlocked)
            core, took = _gcore(target.pid, tmp_path)
        finally:
            target.stop()
        how = "gcore"
    started = time.monotonic()
    rc, out, err = run_gilty("dump", "--core", core, "--format", "json")
    read_s = time.monotonic() - started
    assert rc == 0, err
    from_core = parse_json(out)
    note(interp, f"core_size_mb ({how})", round(core.stat().st_size / 2**20, 1))
    note(interp, f"core_write_s ({how})", round(took, 2))
    note(interp, "core_dump_s", round(read_s, 2))
    # The same moment: every thread's name, state and stack as the live dump had them.
    assert _threads(from_core) == _threads(live)
    assert from_core["target"]["pid"] == live["target"]["pid"]
    assert from_core["target"]["python_version"] == live["target"]["python_version"]
    assert from_core["target"]["core"] == str(core)
    # Both threads wait for a lock (which one is found from the futex), and the deadlock is named.
    for name in ("MainThread", "other"):
        lock = thread_named(from_core, name)["waiting_for_lock"]
        assert lock["type"] == "_thread.lock" and lock["locked"] is True, lock
    a, b = (thread_named(from_core, n)["waiting_for_lock"]["address"] for n in ("MainThread", "other"))
    assert a != b
    (verdict,) = from_core["diagnosis"]
    assert verdict.startswith("deadlock: all 2 Python threads wait to acquire locks"), verdict
    # The text form says the same.
    rc, text, err = run_gilty("dump", "--core", core)
    assert rc == 0, err
    assert f"from core file {core}" in text.splitlines()[0]
    assert "Diagnosis: deadlock" in text
    assert f"main_side ({TARGETS / 'deadlock.py'}:{line_of('deadlock.py', 'main_waits')})" in text


def test_gil_held_in_native_code_is_named(interp, tmp_path):
    one_version(interp, "the GIL-held verdict reads the GIL as every dump does")
    target = start_target(interp.path, "gil_held_hang.py")
    try:

        def hung(report: dict) -> bool:
            states = {t["name"]: t["state"] for t in report["threads"]}
            return states == {"MainThread": "holding_gil", "starved": "waiting_gil"}

        live = _live_dump_when(target.pid, hung)
        core, _ = _gcore(target.pid, tmp_path)
    finally:
        target.stop()
    rc, out, err = run_gilty("dump", "--core", core, "--format", "json")
    assert rc == 0, err
    from_core = parse_json(out)
    assert _threads(from_core) == _threads(live)
    main = thread_named(from_core, "MainThread")
    assert main["syscall"] == "pause"
    assert main["stack"][0]["line"] == line_of("gil_held_hang.py", "pause")
    starved = thread_named(from_core, "starved")
    (verdict,) = from_core["diagnosis"]
    assert verdict.startswith(f"GIL held: thread {main['tid']} 'MainThread' holds the GIL, blocked in pause"), verdict
    assert f"1 thread(s) wait for it ({starved['tid']})" in verdict
    # The C frames under the Python call, unwound from the core's registers and stack: the blocking
    # call and the ctypes call that made it.
    rc, out, err = run_gilty("dump", "--core", core, "--native", "--format", "json")
    assert rc == 0, err
    mixed = thread_named(parse_json(out), "MainThread")["native_stack"]
    functions = [f["function"] for f in mixed]
    assert functions[0] == "pause", functions
    assert "_ctypes_callproc" in functions, functions
    python = [f for f in mixed if f["kind"] == "python"]
    assert [f["function"] for f in python] == ["hang", "<module>"], mixed


def test_bad_core_files_are_one_line(interp, tmp_path):
    one_version(interp, "bad core files are refused before any interpreter is read")
    missing = tmp_path / "nothing-here"
    rc, _, err = run_gilty("dump", "--core", missing)
    assert rc == 2 and "No such file" in assert_one_error_line(err)
    text = tmp_path / "text"
    text.write_text("not a core\n")
    rc, _, err = run_gilty("dump", "--core", text)
    assert rc == 4 and "not a readable ELF core file" in assert_one_error_line(err)
    rc, _, err = run_gilty("dump", "--core", "/bin/true")
    assert rc == 4 and "not a core" in assert_one_error_line(err)
    rc, _, err = run_gilty("dump", "--core", text, "--pid", os.getpid())
    assert rc == 2 and "--core" in assert_one_error_line(err)
    # A core of a program that is not Python.
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        core, _ = _gcore(sleeper.pid, tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    rc, _, err = run_gilty("dump", "--core", core)
    assert rc == 4 and "is not of a Python process" in assert_one_error_line(err)
    # A core cut short (a disk that filled up while it was written).
    target = start_target(interp.path, "deadlock.py")
    try:
        core, _ = _gcore(target.pid, tmp_path)
    finally:
        target.stop()
    cut = tmp_path / "cut"
    with open(core, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(core.stat().st_size // 2))
    rc, _, err = run_gilty("dump", "--core", cut)
    assert rc == 4 and "truncated" in assert_one_error_line(err)


def test_core_whose_interpreter_moved_needs_exe(interp, tmp_path):
    """Debian's python3.11 (no libpython: the interpreter is the executable) run from a copy that is
    deleted before the core is read: the core names a file that is gone, and `--exe` (or `--sysroot`
    holding it at its path) gives it back."""
    one_version(interp, "finding the mapped files is the core reader's, not the version's")
    if not DEBIAN_PYTHON.exists():
        pytest.skip(f"{DEBIAN_PYTHON} is not installed (apt-get install python3.11)")
    copy = tmp_path / "python3.11-copy"
    shutil.copy2(DEBIAN_PYTHON, copy)
    target = start_target(str(copy), "deadlock.py")
    try:
        live = _live_dump_when(target.pid, _deadlocked)
        core, _ = _gcore(target.pid, tmp_path)
    finally:
        target.stop()
    copy.unlink()
    rc, _, err = run_gilty("dump", "--core", core)
    line = assert_one_error_line(err)
    assert rc == 4 and str(copy) in line and "--exe" in line, line
    rc, out, err = run_gilty("dump", "--core", core, "--exe", DEBIAN_PYTHON, "--format", "json")
    assert rc == 0, err
    from_core = parse_json(out)
    assert _threads(from_core) == _threads(live)
    assert from_core["target"]["executable"] == str(DEBIAN_PYTHON)
    # Or the files under a root of their own (a core copied from a container with its image).
    root = tmp_path / "root"
    (root / copy.parent.relative_to("/")).mkdir(parents=True)
    shutil.copy2(DEBIAN_PYTHON, root / copy.relative_to("/"))
    rc, out, err = run_gilty("dump", "--core", core, "--sysroot", root, "--format", "json")
    assert rc == 0, err
    assert _threads(parse_json(out)) == _threads(live)
    # A different build given as the interpreter is refused, not read as if it were the one.
    other = Path("/root/.pyenv/versions/3.11.7/bin/python3.11")
    if other.exists():
        rc, _, err = run_gilty("dump", "--core", core, "--exe", other)
        assert rc == 4 and "--exe" in assert_one_error_line(err)


@pytest.mark.parametrize("kind", ["rlock", "lock"])
def test_deadlock_beside_a_joining_main_thread(interp, tmp_path, kind):
    """RLocks record their holder: the cycle is named thread by thread. Plain locks do not: the
    verdict is that every Python thread waits, the main thread in `Thread.join` (on a lock up to
    3.12, on an event from 3.13, which is why those two versions)."""
    if interp.id.startswith("debian") or interp.minor_str not in ("3.12", "3.13"):
        pytest.skip("join waits on a lock up to 3.12, on an event from 3.13: checked on pyenv 3.12 and 3.13 (suite time)")
    target = start_target(interp.path, "joined_deadlock.py", kind)
    try:
        one, two = line_of("joined_deadlock.py", "one_waits"), line_of("joined_deadlock.py", "two_waits")

        def stuck(report: dict) -> bool:
            lines = {t["name"]: t["stack"][0]["line"] if t["stack"] else None for t in report["threads"]}
            return lines.get("one") == one and lines.get("two") == two

        _live_dump_when(target.pid, stuck)
        core, _ = _gcore(target.pid, tmp_path)
    finally:
        target.stop()
    rc, out, err = run_gilty("dump", "--core", core, "--format", "json")
    assert rc == 0, err
    report = parse_json(out)
    t_one, t_two = thread_named(report, "one"), thread_named(report, "two")
    (verdict,) = report["diagnosis"]
    if kind == "rlock":
        assert t_one["waiting_for_lock"]["owner_tid"] == t_two["tid"]
        assert t_two["waiting_for_lock"]["owner_tid"] == t_one["tid"]
        assert verdict.startswith("deadlock: a cycle of 2 threads: "), verdict
        assert f"waits for _thread.RLock {t_one['waiting_for_lock']['address']:#x} held by thread {t_two['tid']}" in verdict
    else:
        assert t_one["waiting_for_lock"]["owner_tid"] is None
        assert verdict.startswith("deadlock: all 3 Python threads wait"), verdict
        assert f"thread {t_one['tid']} at one (" in verdict and f"thread {t_two['tid']} at two (" in verdict
