"""Stacks as py-spy's integration tests check them: exact function names (qualified), files and lines
for unicode names, many threads, recursion, comprehensions, methods and lambdas; and, on targets whose
stacks change under every read, that every sampled stack is consistent and every line is real.

Parked targets are read with `gilty dump --format json`. The moving targets are sampled through
`gilty._native.Sampler`, which hands over every pass's stack (the record report pools them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal

import pytest
from conftest import TARGETS, line_of, note, parse_json, run_gilty, running_target, thread_named

pytestmark = pytest.mark.interpreter


def dump_json(pid: int) -> dict:
    rc, out, err = run_gilty("dump", "--pid", pid, "--format", "json", timeout=30)
    assert rc == 0, f"gilty dump exited {rc}; stderr:\n{err}"
    return parse_json(out, "gilty dump --format json")


def frames(thread: dict) -> list:
    return [(f["function"], os.path.basename(f["file"]), f["line"]) for f in thread["stack"]]


MOVING_FRAMES = "(inner frames moving)"


def inner_known(stack: list) -> list:
    """The stack below the stand-in for inner frames that kept moving, or the whole stack."""
    return stack[1:] if stack and stack[0][0] == MOVING_FRAMES else stack


def sampled_stacks(pid: int, seconds: float, rate: float = 1000.0) -> tuple:
    """Every (thread name, stack) sampled over ``seconds``, stacks innermost first as (function, file
    basename, line); and the error counters."""
    from gilty import _native

    sampler = _native.Sampler(_native.Target(pid), rate)
    stacks, frame_table, out = {}, {}, []
    errors = {"torn_retried": 0, "torn_dropped": 0, "torn_partial": 0, "read_failed": 0}
    collected = 0.0
    while collected < seconds:
        batch = sampler.collect(0.25)
        collected += 0.25
        stacks.update(batch["stacks"])
        frame_table.update(batch["frames"])
        for key, value in batch["errors"].items():
            errors[key] = errors.get(key, 0) + value  # 3.14+ adds the GIL flags' cross-check
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
    # A stack kept to its outer frames has the stand-in innermost; below it, the same rules.
    bad = [s for s in stacks if s[-1] not in module or len(s) > 22 or any(f[0] != "recurse" for f in inner_known(s)[:-1])]
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
        if (function == "<module>" and line in (0, 1)) or (function == method.split(".")[0] and line in (0, 1, 2)):
            continue  # the exec'd module or class body between two rounds (line 0: not started, 3.12+)
        seen[file] += 1
        if function != method or line not in lines:
            bad.append(stack[0])
    note(interp, "reused code: misnamed innermost frames", len(bad))
    assert all(seen.values()), f"both methods should be sampled: {seen}; errors {errors}"
    # Left: a frame read just before its round ended and decoded (microseconds later) after the next
    # round's code object took its address: about 1 in 2,400 samples of this target on 3.13, whose
    # rounds end every 2 ms. Before every use was checked: 1,639 of 2,391 on 3.10, 76 of 2,557 on 3.13.
    # The window between that read and its decode grows when the sampler is held off its CPU: 9 of
    # 2,124 (0.42 %) at load 9. The guard is against a systematic misnaming (tens of percent), so the
    # bar is 1 %.
    assert len(bad) <= 0.01 * sum(seen.values()), (
        f"{len(bad)} of {sum(seen.values())} samples misnamed, e.g. {sorted(set(bad))[:4]}"
    )


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


@contextlib.contextmanager
def own_cpus(proc_pid: int):
    """The target on CPU 0 and this thread (the sampler's) on CPU 1, as a call-heavy thread on its own
    CPU is: on one shared CPU the target stands still while the sampler reads it. Skips (saying why)
    on a machine with fewer than two CPUs."""
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1 to put the target and the sampler on CPUs of their own")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(proc_pid, {0})
    os.sched_setaffinity(0, {1})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


# Guards: a thread that calls every ~100 ns had 79-99 % of its stacks dropped as torn (its current
# frame moved between the walk's first read and the recheck), so its profile showed the moments its
# stack stood still. Half of the passes at least must keep a stack, none of them torn, and (almost)
# none with a caller away from its call line.
@pytest.mark.alone  # its own CPU and the sampler's: a shared machine changes what it measures
def test_a_recursing_thread_keeps_most_of_its_stacks(interp, request):
    if interp.version and interp.version[:2] == (3, 10):
        # With another job competing for the CPUs, 3.10 kept 517-778 of ~3,000 (603 on the branch that
        # brought the method, so not a merge effect); quiet, 96.9 %. 3.11+ keep most either way.
        request.applymarker(
            pytest.mark.xfail(reason="3.10 keeps under half its stacks when other jobs compete for the CPUs", strict=False)
        )
    script = "recursive.py"
    with running_target(interp, script) as proc, own_cpus(proc.pid):
        sampled, errors = sampled_stacks(proc.pid, 3.0)
        passes = 3000
    main = [stack for name, stack in sampled if stack and stack[-1][0] == "<module>"]
    module = {("<module>", script, line_of(script, m)) for m in ("ready", "loop", "module")}
    torn = [s for s in main if s[-1] not in module or len(s) > 22 or any(f[0] != "recurse" for f in inner_known(s)[:-1])]
    call_line = line_of(script, "recurse")
    # A stricter tear: a caller not at its call line (two moments of a stack that looked alike). Under
    # the stand-in, the innermost kept frame is where the later copy had it: not a caller.
    mixed = [s for s in main if any(f[2] != call_line for f in inner_known(s)[1:-1])]
    note(interp, "recursion pinned: kept of 3000 passes", len(main))
    note(interp, "recursion pinned: caller off its call line", len(mixed))
    assert not torn, f"{len(torn)} torn stacks kept, e.g. {torn[:1]}"
    # Kept stacks with a caller off its call line, of ~2,800, on a busy machine: 0-8 with the second
    # copy; before it 2-21 of ~2,500 on 3.11+ (the bound catches the worst of those, not all).
    # A clean clone's alone part read 16 of 3,006 on 3.12 (0.53 %) once: 1 % leaves that room.
    assert len(mixed) <= 0.01 * len(main), f"{len(mixed)} of {len(main)} kept stacks mix two moments, e.g. {mixed[:1]}"
    assert len(main) >= passes / 2, f"only {len(main)} of ~{passes} passes kept a stack; errors {errors}"


def run_delay_s(pid: int) -> float:
    """Seconds the target's main thread has waited on a run queue (/proc/PID/task/PID/schedstat)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


# Guards: the bias left by dropped stacks. call_mix.py alternates 20-deep recursions with a loop that
# calls nothing and times both itself; the share of kept samples in the recursions must be the share
# of the time they took (measured by the target over the same window).
# Its inner frames move on nearly every copy: such samples keep the outer frames that held still, under
# "(inner frames moving)", rather than being dropped (docs/states.md, "call-heavy code"). On quiet runs
# 3.11+ read -2.8 to +0.3 points from the true share; 3.10, whose frames are heap objects, -9.7 to -12.5.
@pytest.mark.alone  # its own CPU and the sampler's: a shared machine changes what it measures
def test_call_heavy_code_is_sampled_in_proportion_to_its_time(interp, request):
    if interp.version[:2] == (3, 10):
        request.applymarker(
            pytest.mark.xfail(
                reason="known miss on 3.10: call-heavy code sampled 10-13 points under its time (docs/states.md)", strict=False
            )
        )
    script = "call_mix.py"
    with running_target(interp, script) as proc, own_cpus(proc.pid):
        proc.popen.send_signal(signal.SIGUSR1)
        start = json.loads(proc.read_line(10))
        waited = run_delay_s(proc.pid)
        sampled, errors = sampled_stacks(proc.pid, 3.0)
        waited = run_delay_s(proc.pid) - waited
        proc.popen.send_signal(signal.SIGUSR1)
        end = json.loads(proc.read_line(10))
    spent = {k: end[k] - start[k] for k in start}
    # A target that waits for its CPU puts whole time slices into one phase: the two shares then
    # differ by chance, not by the sampler.
    if waited > 0.05 * sum(spent.values()):
        pytest.skip(
            f"target waited {waited:.2f} s of {sum(spent.values()):.2f} s for its CPU (a busy machine): the in-process reference does not hold"
        )
    true_share = spent["calls"] / (spent["calls"] + spent["flat"])
    phases = [next((f[0] for f in stack if f[0] in ("calls", "flat")), None) for _name, stack in sampled]
    n_calls, n_flat = phases.count("calls"), phases.count("flat")
    assert n_calls + n_flat > 1000, f"{n_calls + n_flat} samples kept in 3 s; errors {errors}"
    bias = 100 * (n_calls / (n_calls + n_flat) - true_share)
    note(interp, "call mix: sampled minus true share of calls (points)", round(bias, 1))
    note(interp, "call mix: stacks kept to their outer frames", errors["torn_partial"])
    # A stack kept to its outer frames has the stand-in innermost, once, over frames down to the first.
    moving = [stack for _name, stack in sampled if any(f[0] == MOVING_FRAMES for f in stack)]
    bad = [s for s in moving if s[0][0] != MOVING_FRAMES or s[-1][0] != "<module>" or any(f[0] == MOVING_FRAMES for f in s[1:])]
    assert not bad, bad[:3]
    assert abs(bias) <= 4.0, (
        f"calls sampled {100 * n_calls / (n_calls + n_flat):.1f} % of the time, true {100 * true_share:.1f} %; errors {errors}"
    )


# Guards: a uWSGI worker's main thread shown as "(no Python stack)" while it served a request (3.11+).
# uWSGI forks its workers without telling the interpreter (no PyOS_AfterFork_Child), so the worker's
# thread state keeps its master's native thread id and matched no thread of the worker. raw_fork.py
# forks the same way (libc's fork through ctypes).
def test_a_child_forked_behind_the_interpreters_back_has_its_stack(interp):
    script = "raw_fork.py"
    with running_target(interp, script) as proc:
        child = int(proc.read_line(10))
        try:
            sampled, errors = sampled_stacks(child, 1.0, rate=200)
        finally:
            os.kill(child, signal.SIGKILL)
    main = [stack for name, stack in sampled]
    spinning = [s for s in main if s and s[0][:2] == ("child_spin", script)]
    note(interp, "raw fork: child stacks with child_spin", len(spinning))
    assert len(spinning) >= 0.5 * len(main) > 0, (
        f"{len(spinning)} of {len(main)} samples show child_spin, e.g. {main[:1]}; errors {errors}"
    )
