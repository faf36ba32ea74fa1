"""Asyncio tasks deadlocked in await cycles (issue 30, item 11): `dump --tasks` listed only the tasks a
root leads to, so tasks waiting on each other (or on themselves) were counted in the header and never
shown. Every task is listed, each cycle is named with the word "deadlock", the JSON carries the
cycles, and `record --tasks` samples every such task without looping."""

from __future__ import annotations

import pytest
from conftest import parse_json, record_json, run_gilty, running_target

pytestmark = pytest.mark.interpreter

NAMES = {"Task-1", "sleeper", "hanger", "selfish", "cycle-a", "cycle-b", "ring-0", "ring-1", "ring-2"}
CYCLES = [{"cycle-a", "cycle-b"}, {"selfish"}, {"ring-0", "ring-1", "ring-2"}]


@pytest.fixture(scope="module")
def cyclic(interp):
    with running_target(interp, "asyncio_cycle.py") as proc:
        yield proc


def test_text_lists_every_task_and_names_each_cycle(cyclic):
    rc, out, err = run_gilty("dump", "--pid", cyclic.pid, "--tasks", timeout=60)
    assert rc == 0 and "Traceback" not in err, err
    assert f"{len(NAMES)} task(s)" in out, out
    body = out[out.index("Event loop 0x") :]
    listed = [n for n in NAMES if f"{n} [pending]" in body]
    assert sorted(listed) == sorted(NAMES), out
    rings = [line for line in body.splitlines() if "deadlock: await cycle:" in line]
    assert len(rings) == 3, out
    for members in CYCLES:
        ring = next((r for r in rings if all(f"{m} 0x" in r for m in members)), None)
        assert ring is not None, (members, rings)
        # The ring closes on the task it starts with: "a → b → a", "selfish → selfish".
        names = [part.strip().split(" 0x")[0] for part in ring.split("await cycle:", 1)[1].split("→")]
        assert names[0] == names[-1] and set(names) == members and len(names) == len(members) + 1, ring
    for n in ("hanger", "sleeper", "Task-1"):
        line = next(line for line in body.splitlines() if f"{n} [pending]" in line)
        assert "deadlock" not in line, line


def test_json_carries_the_cycles(cyclic):
    rc, out, err = run_gilty("dump", "--pid", cyclic.pid, "--tasks", "--format", "json", timeout=60)
    assert rc == 0, err
    got = parse_json(out)["asyncio"]
    by_id = {t["id"]: t for t in got["tasks"]}
    assert {t["name"] for t in got["tasks"]} == NAMES
    cycles = [[by_id[i]["name"] for i in c] for c in got["cycles"]]
    assert sorted(map(frozenset, cycles), key=sorted) == sorted(map(frozenset, CYCLES), key=sorted), cycles
    for c in got["cycles"]:
        # Each task waits for the next, the last for the first.
        for a, b in zip(c, c[1:] + c[:1]):
            assert b in by_id[a]["waits_for"] or by_id[b]["parent"] == a, (by_id[a], by_id[b])
    in_cycle = {t["name"] for t in got["tasks"] if t["in_cycle"]}
    assert in_cycle == set().union(*CYCLES)
    assert by_id[next(i for i, t in by_id.items() if t["name"] == "hanger")]["waits_for"], "hanger awaits cycle-a"


def test_record_tasks_samples_every_task_of_a_cycle(cyclic):
    report = record_json(cyclic.pid, duration=2, rate=50, extra=("--tasks",))
    tasks = report["tasks"]
    assert tasks["passes"] > 0, tasks
    named = {r["name"] for r in tasks["longest_lived"]}
    assert set().union(*CYCLES) <= named, named
    for s in tasks["stacks"]:
        # A path ends before a task repeats.
        assert len(s["path"]) == len(set(s["path"])), s["path"]
