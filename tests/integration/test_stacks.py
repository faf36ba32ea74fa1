"""Stacks as py-spy's integration tests check them: exact function names (qualified), files and lines
for unicode names, many threads, recursion, comprehensions, methods and lambdas; and, on targets whose
stacks change under every read, that every sampled stack is consistent and every line is real.

Parked targets are read with `gilty dump --format json`. The moving targets are sampled through
`gilty._native.Sampler`, which hands over every pass's stack (the record report pools them).
"""

from __future__ import annotations

import os

import pytest

from conftest import TARGETS, line_of, note, parse_json, run_gilty, running_target, thread_named

pytestmark = pytest.mark.interpreter


def dump_json(pid: int) -> dict:
    rc, out, err = run_gilty("dump", "--pid", pid, "--format", "json", timeout=30)
    assert rc == 0, f"gilty dump exited {rc}; stderr:\n{err}"
    return parse_json(out, "gilty dump --format json")


def frames(thread: dict) -> list:
    return [(f["function"], os.path.basename(f["file"]), f["line"]) for f in thread["stack"]]


def sampled_stacks(pid: int, seconds: float, rate: float = 1000.0) -> tuple:
    """Every (thread name, stack) sampled over ``seconds``, stacks innermost first as (function, file
    basename, line); and the error counters."""
    from gilty import _native

    sampler = _native.Sampler(_native.Target(pid), rate)
    stacks, frame_table, out = {}, {}, []
    errors = {"torn_retried": 0, "torn_dropped": 0, "read_failed": 0}
    collected = 0.0
    while collected < seconds:
        batch = sampler.collect(0.25)
        collected += 0.25
        stacks.update(batch["stacks"])
        frame_table.update(batch["frames"])
        for key, value in batch["errors"].items():
            errors[key] += value
        # The sampler counts each (thread, state, stack) per batch: every sample of a stack is one count.
        for tid, _state, stack_id, n in batch["counts"]:
            if stack_id >= 0:
                stack = [frame_table[f] for f in stacks[stack_id]]
                out.extend([(batch["threads"].get(tid), [(fn, os.path.basename(file), line) for fn, file, line in stack])] * n)
    return out, errors


@pytest.fixture(scope="module")
def qualnames(interp):
    with running_target(interp, "qualnames.py") as proc:
        yield dump_json(proc.pid)


def qualified(interp) -> bool:
    return interp.version[:2] >= (3, 11)


# Guards: methods shown without their class, and two classes' `run` methods merged into one function.
def test_methods_of_two_classes_with_the_same_name(interp, qualnames):
    script = "qualnames.py"
    for thread, function, marker in (("foo", "Foo.run", "foo_run"), ("bar", "Bar.run", "bar_run")):
        stack = frames(thread_named(qualnames, thread))
        assert stack[:2] == [("park", script, line_of(script, "park")), (function, script, line_of(script, marker))], stack
        # Thread._bootstrap is a method of threading.Thread on every version (3.10: read from `self`).
        assert stack[-1][:2] == ("Thread._bootstrap", "threading.py"), stack


# Guards: 3.10's class lookup taking `cls` for an instance (a classmethod's argument is the class itself).
def test_classmethod_named_after_its_class(interp, qualnames):
    stack = frames(thread_named(qualnames, "baz"))
    assert stack[1] == ("Baz.create", "qualnames.py", line_of("qualnames.py", "baz_create")), stack


# Guards: co_qualname not read on 3.11+ (a lambda is `main.<locals>.<lambda>` there; 3.10 has no qualname).
def test_lambda_inside_a_function(interp, qualnames):
    script = "qualnames.py"
    lambda_name = "main.<locals>.<lambda>" if qualified(interp) else "<lambda>"
    stack = frames(thread_named(qualnames, "lambda"))
    assert stack[1:3] == [(lambda_name, script, line_of(script, "lambda")), ("main", script, line_of(script, "main"))], stack


# Guards: a comprehension frame invented on 3.12+ (PEP 709 inlines list comprehensions) or lost on 3.10/3.11.
def test_list_comprehension_frame_until_3_12(interp, qualnames):
    script = "qualnames.py"
    line = line_of(script, "listcomp")
    stack = frames(thread_named(qualnames, "comprehension"))
    if interp.version[:2] >= (3, 12):
        expected = [("comprehension", script, line)]
    else:
        listcomp = "comprehension.<locals>.<listcomp>" if qualified(interp) else "<listcomp>"
        expected = [(listcomp, script, line), ("comprehension", script, line)]
    assert stack[1 : 1 + len(expected)] == expected, stack
    assert stack[1 + len(expected)][0] == "Thread.run", stack


# Guards: Cyrillic (2-byte UTF-8) and CJK Extension B (4-byte UTF-8, UCS-4 str) names in the file
# name and in function names garbled, cut or replaced.
def test_cyrillic_and_four_byte_names(interp):
    script = "стеки_𠜎.py"
    with running_target(interp, script) as proc:
        dump = dump_json(proc.pid)
    for thread, function, marker in (("cyrillic", "функция_стека", "cyrillic"), ("astral", "函数_𠜎𠀋", "astral")):
        top = thread_named(dump, thread)["stack"][0]
        assert (top["function"], top["line"]) == (function, line_of(script, marker)), top
        assert top["file"] == str(TARGETS / script), top


# Guards: threads beyond the first few missing, or stacks attributed to the wrong thread.
def test_ten_named_threads(interp):
    script = "ten_threads.py"
    with running_target(interp, script) as proc:
        dump = dump_json(proc.pid)
    names = sorted(t["name"] for t in dump["threads"])
    assert names == sorted(["MainThread"] + [f"named-{i}" for i in range(10)]), names
    for i in range(10):
        stack = frames(thread_named(dump, f"named-{i}"))
        assert stack[0] == ("wait_here", script, line_of(script, "wait_here")), stack
        assert stack[1][0] == "Thread.run" and stack[-1][0] == "Thread._bootstrap", stack


# Guards: torn stacks passing as real ones while the target's stack moves under the walk (py-spy's
# recursive.py): 3.10 walks that ran into freed frames (a `recurse` frame outermost, or deeper than the
# recursion), 3.11+ walks through stale frame memory. Every accepted stack must be `<module>` under
# at most 21 `recurse` frames; tears are counted, not shown.
def test_recursion_stacks_are_never_torn(interp):
    script = "recursive.py"
    with running_target(interp, script) as proc:
        sampled, errors = sampled_stacks(proc.pid, 3.0)
    stacks = [stack for name, stack in sampled]
    assert stacks, f"no stack accepted in 3 s; errors {errors}"
    # "ready": a sampler attached within microseconds can catch the module before its loop starts.
    module = {("<module>", script, line_of(script, marker)) for marker in ("ready", "loop", "module")}
    bad = [s for s in stacks if s[-1] not in module or len(s) > 22 or any(f[0] != "recurse" for f in s[:-1])]
    note(interp, "recursion: torn stacks dropped", errors["torn_dropped"])
    note(interp, "recursion: stacks accepted", len(stacks))
    assert not bad, f"{len(bad)} of {len(stacks)} stacks are torn, e.g. {bad[:2]}; errors {errors}"
    assert errors["read_failed"] == 0, errors


# Guards: line 0 for threads sampled on an instruction without a location, such as the backward jump
# closing a `for` loop whose body ends in an `if` (3.10 JUMP_ABSOLUTE, 3.11 JUMP_BACKWARD), where a
# spinning thread waits for the GIL. Four spinning threads keep the GIL contended.
def test_every_sampled_line_of_spinning_loops_is_a_loop_line(interp):
    script = "loop_lines.py"
    loop_lines = {
        "spin_while": {line_of(script, "while_head"), line_of(script, "while_body")},
        "spin_for": {line_of(script, m) for m in ("for_head", "for_test", "for_body")},
    }
    with running_target(interp, script) as proc:
        sampled, _errors = sampled_stacks(proc.pid, 2.0)
    seen = {"spin_while": 0, "spin_for": 0}
    for name, stack in sampled:
        if name == "MainThread" or not stack:
            continue
        function, file, line = stack[0]
        assert file == script and function in loop_lines, stack
        assert line in loop_lines[function], f"{name} sampled at line {line} of {function}: {stack[0]}"
        seen[function] += 1
    assert all(seen.values()), seen


# Guards: a code object (or class) decoded once by address and trusted after it was freed and another
# made there: `record -- CMD` named `Foo.run` as the `<module>` of a `.pth` line exec'd at start-up.
# reused_code.py frees and re-creates two methods' code objects and classes at the same addresses
# every few milliseconds; a kept line table puts a method on lines it never runs, a kept class name
# calls `Bar.go1` `Foo.go1` (3.10).
def test_code_objects_and_classes_reused_at_one_address_keep_their_own_names(interp):
    script = "reused_code.py"
    with running_target(interp, script) as proc:
        sampled, errors = sampled_stacks(proc.pid, 3.0)
    allowed = {"gen_alpha.py": ("Foo.run", {2, 3, 4}), "gen_bravo.py": ("Bar.go1", {2, 3, 4, 5, 6, 7})}
    seen = {file: 0 for file in allowed}
    bad = []
    for _name, stack in sampled:
        if not stack or stack[0][1] not in allowed:
            continue
        function, file, line = stack[0]
        method, lines = allowed[file]
        if function in ("<module>", method.split(".")[0]) and line in (0, 1):
            continue  # the exec'd module or class body between two rounds (line 0: not started, 3.12+)
        seen[file] += 1
        if function != method or line not in lines:
            bad.append(stack[0])
    note(interp, "reused code: misnamed innermost frames", len(bad))
    assert all(seen.values()), f"both methods should be sampled: {seen}; errors {errors}"
    assert not bad, f"{len(bad)} of {sum(seen.values())} samples misnamed, e.g. {sorted(set(bad))[:4]}"


# Guards: 3.13's `__init__` cleanup shim (an interpreter-owned frame, `__init__ (__init__:0)`) shown
# between a caller and `Foo.__init__` in thousands of samples; tracebacks leave it out.
def test_no_interpreter_shim_frame_between_a_caller_and_init(interp):
    script = "init_calls.py"
    with running_target(interp, script) as proc:
        sampled, errors = sampled_stacks(proc.pid, 2.0)
    inits = [stack for _name, stack in sampled if stack and stack[0][0] == "Foo.__init__"]
    shims = [stack for _name, stack in sampled if any(f[1] == "__init__" for f in stack)]
    note(interp, "init calls: stacks with a shim frame", len(shims))
    assert inits, f"Foo.__init__ never sampled; errors {errors}"
    assert not shims, f"{len(shims)} of {len(sampled)} stacks show an interpreter shim frame, e.g. {shims[0]}"
    callers = {stack[1] for stack in inits if len(stack) > 1}
    assert callers == {("make", script, line_of(script, "make"))}, callers
