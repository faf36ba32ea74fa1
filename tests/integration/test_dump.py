"""`gilty dump` against targets whose threads, names, functions and line numbers are known exactly."""

from __future__ import annotations

import os

import pytest
from conftest import (
    TARGETS,
    line_of,
    parse_json,
    run_gilty,
    running_target,
    settled_state,
    task_ids,
    thread_named,
)

pytestmark = pytest.mark.interpreter


def dump_json(pid: int) -> dict:
    rc, out, err = run_gilty("dump", "--pid", pid, "--format", "json", timeout=30)
    assert rc == 0, f"gilty dump exited {rc}; stderr:\n{err}"
    assert "Traceback" not in err, err
    return parse_json(out, "gilty dump --format json")


def frames(thread: dict) -> list:
    return [(f["function"], os.path.basename(f["file"]), f["line"]) for f in thread["stack"]]


def sleep_syscalls(interp) -> set:
    # time.sleep: clock_nanosleep from 3.11 on; 3.10 sleeps in select(), which glibc may issue as pselect6.
    return {"select", "pselect6"} if interp.version[:2] == (3, 10) else {"clock_nanosleep"}


@pytest.fixture(scope="module")
def known_stack(interp):
    with running_target(interp, "known_stack.py") as proc:
        yield proc


@pytest.fixture(scope="module")
def named_threads(interp):
    with running_target(interp, "thread_names.py") as proc:
        yield proc


@pytest.fixture(scope="module")
def unicode_target(interp):
    with running_target(interp, "ünïcode_名前.py") as proc:
        yield proc


@pytest.fixture(scope="module")
def recursion(interp):
    with running_target(interp, "blocked_in_recursion.py") as proc:
        yield proc


@pytest.fixture(scope="module")
def many_threads(interp):
    with running_target(interp, "many_threads.py") as proc:
        yield proc


# Guards: wrong co_firstlineno/line-table decoding (3.10 lnotab, 3.11+ locations), frames skipped
# or mis-ordered when walking the frame chain, and the reader leaving the target changed.
def test_known_stack_has_exact_functions_and_lines(interp, known_stack):
    before = settled_state(known_stack.pid)
    dump = dump_json(known_stack.pid)
    script = "known_stack.py"

    worker = thread_named(dump, "stack-thread")
    assert frames(worker)[:3] == [
        ("level_three", script, line_of(script, "level_three")),
        ("level_two", script, line_of(script, "level_two")),
        ("level_one", script, line_of(script, "level_one")),
    ], worker["stack"]
    assert all(f["file"] == str(TARGETS / script) for f in worker["stack"][:3]), worker["stack"][:3]
    assert worker["state"] == "idle" and worker["syscall"] in sleep_syscalls(interp), worker

    main = thread_named(dump, "MainThread")
    ours = [f for f in frames(main) if f[1] == script]
    assert ours == [
        ("main_wait", script, line_of(script, "main_wait")),
        ("<module>", script, line_of(script, "module")),
    ], main["stack"]
    assert frames(main)[-1] == ("<module>", script, line_of(script, "module")), "the outermost frame is the module"

    after = settled_state(known_stack.pid)
    assert known_stack.alive() and after == before, (before, after)


# Guards: tids that are not the target's OS thread ids, or a thread missing from / invented in the dump.
def test_dump_lists_every_os_thread_with_its_tid(interp, known_stack):
    dump = dump_json(known_stack.pid)
    assert sorted(t["tid"] for t in dump["threads"]) == sorted(task_ids(known_stack.pid))
    assert dump["target"]["pid"] == known_stack.pid


# Guards: a wrong version (e.g. a micro number guessed instead of read) or executable in the header.
def test_target_version_and_executable_match_the_interpreter(interp, known_stack):
    target = dump_json(known_stack.pid)["target"]
    reported = target["python_version"]
    parts = reported.split(".")
    assert parts[:2] == [str(interp.version[0]), str(interp.version[1])], reported
    if len(parts) > 2:  # a micro version is optional, but when given it must be right
        assert reported == interp.version_str, f"gilty says {reported}, the interpreter is {interp.version_str}"
    assert os.path.realpath(target["executable"]) == os.path.realpath(interp.path), target
    assert target["switch_interval_s"] == pytest.approx(0.005), target


# Guards: Python thread names (threading.Thread.name) decoded wrongly for each PyUnicode storage
# kind (ASCII, Latin-1, UCS-2, UCS-4), or replaced by the OS thread name.
def test_thread_names_of_every_unicode_kind(interp, named_threads):
    dump = dump_json(named_threads.pid)
    script = "thread_names.py"
    for name in ("plain-ascii", "wörker-é", "線程", "snake-🐍"):
        thread = thread_named(dump, name)
        assert frames(thread)[0] == ("park", script, line_of(script, "park")), thread["stack"]
    assert sorted(t["name"] for t in dump["threads"]) == sorted(["MainThread", "plain-ascii", "wörker-é", "線程", "snake-🐍"])


# Guards: non-ASCII file names and function names (co_filename / co_name as UCS-2) garbled or dropped.
def test_unicode_file_and_function_names(interp, unicode_target):
    script = "ünïcode_名前.py"
    dump = dump_json(unicode_target.pid)
    for name in ("wörker-é", "線程"):
        thread = thread_named(dump, name)
        top = thread["stack"][0]
        assert top["function"] == "функция", top
        assert top["file"] == str(TARGETS / script), top
        assert top["line"] == line_of(script, "функция"), top


# Guards: the text renderer mangling non-ASCII names (encoding errors, replacement characters).
def test_text_dump_shows_unicode_names(interp, unicode_target):
    rc, out, err = run_gilty("dump", "--pid", unicode_target.pid, "--format", "text", timeout=30)
    assert rc == 0, err
    for expected in ("wörker-é", "線程", "функция", f"ünïcode_名前.py:{line_of('ünïcode_名前.py', 'функция')}"):
        assert expected in out, f"{expected!r} missing from:\n{out}"


# Guards: stack walks truncated at a small depth limit, or the recursion loop detected as a cycle.
def test_recursion_depth_50(interp, recursion):
    script = "blocked_in_recursion.py"
    dump = dump_json(recursion.pid)
    stack = frames(thread_named(dump, "recurser"))
    recurse_frames = [f for f in stack if f[0] == "recurse"]
    assert len(recurse_frames) >= 50, f"only {len(recurse_frames)} recurse frames"
    # recurse(50) .. recurse(0): exactly 51, innermost at the bottom line, every caller at the call line.
    assert len(recurse_frames) == 51, len(recurse_frames)
    assert stack[0] == ("recurse", script, line_of(script, "bottom")), stack[:2]
    assert stack[1:51] == [("recurse", script, line_of(script, "recurse"))] * 50


# Guards: threads lost past some fixed count (thread list walk cut short) or names read for only some.
def test_forty_threads_all_listed_with_names(interp, many_threads):
    dump = dump_json(many_threads.pid)
    names = sorted(t["name"] for t in dump["threads"])
    assert names == sorted(["MainThread"] + [f"worker-{i:02d}" for i in range(40)]), names
    assert sorted(t["tid"] for t in dump["threads"]) == sorted(task_ids(many_threads.pid))
    line = line_of("many_threads.py", "wait")
    for thread in dump["threads"]:
        if thread["name"].startswith("worker-"):
            assert ("wait_forever", "many_threads.py", line) in frames(thread), thread
            assert thread["state"] == "idle" and thread["syscall"] == "futex", thread


# Guards: the text format leaving out thread names, tids or file:line locations.
def test_text_dump_has_names_and_locations(interp, known_stack):
    rc, out, err = run_gilty("dump", "--pid", known_stack.pid, timeout=30)
    assert rc == 0, err
    assert "stack-thread" in out and "MainThread" in out, out
    for marker, function in (("level_three", "level_three"), ("level_one", "level_one")):
        assert function in out and f"known_stack.py:{line_of('known_stack.py', marker)}" in out, out
    for tid in task_ids(known_stack.pid):
        assert str(tid) in out, f"tid {tid} missing:\n{out}"


# Guards (issue 31, item 18): on 3.10 a dump of a thread that recursed 20 deep and back all the time
# came back with `"stack": []` in 3-50 % of dumps (every walk torn, and a dump had no earlier walk to
# keep the outer frames by, as `record` has), with `positions_error: "the stack kept moving ..."`.
# Every dump must reach `<module>` (py-spy's recursive.py), and a version without columns (3.10)
# has no positions to fail on.
def test_dumps_of_a_recursing_thread_reach_module(interp, targets):
    if interp.version[:2] != (3, 10):
        pytest.skip("3.10's heap frames are what tore the dump's walks; 3.11+ read them whole (test_stacks)")
    target = targets(interp, "recursive.py")
    module_line = line_of("recursive.py", "module")
    for _ in range(12):
        thread = dump_json(target.pid)["threads"][0]
        got = frames(thread)
        assert got and got[-1] == ("<module>", "recursive.py", module_line), thread
        assert "positions_error" not in thread, thread
