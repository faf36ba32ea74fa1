"""Await cycles in `dump --tasks` (issue 30, item 11), on task lists as `Target.tasks()` hands them
over: tasks no root leads to are listed, cycles named, and no edge pattern (a cycle of stale parents,
a task its own parent, a chain of thousands) makes the renderer loop or exceed Python's recursion."""

from __future__ import annotations

from gilty.report.dump import await_cycles
from gilty.report.dump import tasks as tasks_report

LOOP = 0x1000


def task(i: int, name: str, parent=None, waits=(), kind="task"):
    return {
        "id": i,
        "name": name,
        "state": "pending",
        "loop": LOOP,
        "python_impl": False,
        "eager": False,
        "stack": [(name, "app.py", i)],
        "awaiting": {"kind": kind, "type": "_asyncio.Task", "address": waits[0] if waits else 0},
        "parent": parent,
        "parent_via": "await" if parent else None,
        "waits_for": list(waits),
    }


def snapshot(tasks: list) -> dict:
    return {
        "asyncio_imported": True,
        "other_frameworks": [],
        "loops": [{"address": LOOP, "type": "L", "thread_ident": 1, "tid": 1, "running_task": None}],
        "tasks": tasks,
        "errors": {"torn_dropped": 0, "unreadable": 0, "changed": 0},
    }


def listed(text: str) -> list:
    return [line.split("[pending]")[0].split()[-1] for line in text.splitlines() if "[pending]" in line]


def test_a_pair_and_a_self_gather_are_listed_and_named():
    tasks = [
        task(1, "main"),
        task(2, "a", parent=3, waits=[3]),
        task(3, "b", parent=2, waits=[2]),
        task(4, "me", parent=4, waits=[4], kind="gather"),
        task(5, "under-a", parent=2),
    ]
    text = tasks_report.render_text(snapshot(tasks), {1: "MainThread"})
    assert "5 task(s)" in text
    assert sorted(listed(text)) == ["a", "b", "main", "me", "under-a"], text
    assert "deadlock: await cycle: a 0x2 → b 0x3 → a 0x2" in text, text
    assert "deadlock: await cycle: me 0x4 → me 0x4" in text, text
    assert "a [pending] 0x2 (deadlock: in an await cycle)" in text
    assert "under-a [pending] 0x5 via await" in text and "under-a [pending] 0x5 (deadlock" not in text
    report = tasks_report.tasks_report(snapshot(tasks))
    assert report["cycles"] == [[2, 3], [4]]
    assert [t["in_cycle"] for t in report["tasks"]] == [False, True, True, True, False]


def test_a_cycle_seen_only_through_what_tasks_await():
    # hanger is cycle-a's recorded parent, so the parent edges hold no cycle: waits_for does.
    tasks = [task(1, "hanger", waits=[2]), task(2, "cycle-a", parent=1, waits=[3]), task(3, "cycle-b", parent=2, waits=[2])]
    cycles, in_cycle = await_cycles.find(tasks)
    assert cycles == [[2, 3]] and in_cycle == {2, 3}


def test_a_ring_through_a_gather_is_one_cycle():
    tasks = [task(1, "r0", waits=[2]), task(2, "r1", waits=[3], kind="gather"), task(3, "r2", waits=[1])]
    assert await_cycles.find(tasks) == ([[1, 2, 3]], {1, 2, 3})


def test_two_cycles_sharing_a_task_cover_both():
    tasks = [task(1, "hub", waits=[2, 3], kind="gather"), task(2, "x", waits=[1]), task(3, "y", waits=[1])]
    cycles, in_cycle = await_cycles.find(tasks)
    assert in_cycle == {1, 2, 3} and {frozenset(c) for c in cycles} == {frozenset({1, 2}), frozenset({1, 3})}


def test_a_long_chain_and_a_long_ring_render_without_recursion():
    n = 5000
    chain = [task(1, "t1")] + [task(i, f"t{i}", parent=i - 1, waits=[i + 1] if i < n else []) for i in range(2, n + 1)]
    text = tasks_report.render_text(snapshot(chain), {})
    assert len(listed(text)) == n and "deadlock" not in text
    ring = [task(i, f"r{i}", parent=(i - 2) % n + 1, waits=[i % n + 1]) for i in range(1, n + 1)]
    text = tasks_report.render_text(snapshot(ring), {})
    assert len(listed(text)) == n and text.count("deadlock: await cycle:") == 1
    assert await_cycles.find(ring)[1] == set(range(1, n + 1))


def test_edges_to_unknown_tasks_are_ignored():
    tasks = [task(1, "a", parent=99, waits=[98, 1])]
    assert await_cycles.find(tasks) == ([[1]], {1})
    assert listed(tasks_report.render_text(snapshot(tasks), {})) == ["a"]
