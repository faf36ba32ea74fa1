"""Threads asleep at recursion depth 3,000 and 20,000 (issue 30, item 12): a walk stopped at 2,048
frames and called the stack torn, so `dump` showed "(no Python stack)" with "the stack kept moving"
and `record` charged every sample to function None. Deep stacks are read whole (up to
`frames::MAX_DEPTH`, past which the outer frames are cut under a marker), on every version: 3.10
walks heap frame objects, 3.11+ interpreter frames in data-stack chunks."""

from __future__ import annotations

import pytest
from conftest import line_of, parse_json, record_json, run_gilty, running_target, thread_named

pytestmark = pytest.mark.interpreter

DEPTHS = (3000, 20000)
CUT_MARKER = "(outer frames not read)"
BOTTOM = line_of("deep_sleep.py", "bottom")
DESCEND = line_of("deep_sleep.py", "descend")


@pytest.fixture(scope="module")
def deep(interp):
    with running_target(interp, "deep_sleep.py", *map(str, DEPTHS)) as proc:
        yield proc


@pytest.mark.parametrize("depth", DEPTHS)
def test_dump_shows_the_whole_deep_stack(deep, depth):
    rc, out, err = run_gilty("dump", "--pid", deep.pid, "--format", "json", timeout=60)
    assert rc == 0 and "Traceback" not in err, err
    thread = thread_named(parse_json(out), f"deep-{depth}")
    assert thread["state"] == "idle", thread["state"]
    assert "positions_error" not in thread, thread["positions_error"]
    stack = thread["stack"]
    assert stack, "no Python stack"
    assert (stack[0]["function"], stack[0]["line"]) == ("sleep_at_bottom", BOTTOM), stack[0]
    functions = [f["function"] for f in stack]
    assert CUT_MARKER not in functions
    # descend(depth) .. descend(0): depth + 1 frames, all at the recursive call but the innermost.
    assert functions.count("descend") == depth + 1, functions.count("descend")
    assert sum(f["line"] == DESCEND for f in stack if f["function"] == "descend") == depth


def test_dump_text_names_the_leaf(deep):
    rc, out, err = run_gilty("dump", "--pid", deep.pid, timeout=60)
    assert rc == 0, err
    for depth in DEPTHS:
        block = out.split(f"'deep-{depth}' (", 1)[1].split("\nThread ", 1)[0]
        assert block.startswith("idle"), block[:200]
        assert "(no Python stack)" not in block
        assert block.splitlines()[1].strip().startswith("sleep_at_bottom ("), block[:300]


def test_record_charges_the_leaf_function(deep):
    report = record_json(deep.pid, duration=2, rate=100)
    for depth in DEPTHS:
        thread = thread_named(report, f"deep-{depth}")
        assert thread["samples"] > 0
        top = thread["top_functions"][0]
        assert (top["function"], top["line"], top["fraction"]) == ("sleep_at_bottom", BOTTOM, 1.0), thread["top_functions"]
    assert report["errors"]["torn_dropped"] == 0, report["errors"]


def test_deeper_than_the_walk_is_cut_with_a_marker(interp):
    """120,000 frames, past `MAX_DEPTH` (100,000): the innermost frames and the marker at the root end."""
    if interp.version[:2] == (3, 10):
        pytest.skip("3.10 recurses on the C stack too: 120,000 frames need ~1 GB of it")
    with running_target(interp, "deep_sleep.py", "120000") as proc:
        rc, out, err = run_gilty("dump", "--pid", proc.pid, "--format", "json", timeout=60)
        assert rc == 0, err
        thread = thread_named(parse_json(out), "deep-120000")
        stack = thread["stack"]
        assert stack[0]["function"] == "sleep_at_bottom" and stack[-1]["function"] == CUT_MARKER, (stack[:1], stack[-1:])
        assert len(stack) == 100_001, len(stack)
        # The frames read have their positions (3.11+): the locals' walk stops where the stack's did
        # (before, it read 100,000 frames five times over, gave up, and left every position out).
        assert "positions_error" not in thread, thread.get("positions_error")
        assert stack[0]["position"]["line"] == BOTTOM and stack[-2]["position"]["line"] == stack[-2]["line"], stack[-2]
        assert stack[-1]["position"] is None
