"""The task view of a recording (`record --tasks`) built from synthetic batches, as the native
sampler hands them over: merged across batches, saved and loaded, documented key by key, and drawn
by every stack format."""

from __future__ import annotations

import json

import pytest
from gilty.report.recording import chrome_trace, collapsed, speedscope
from gilty.report.recording import json as json_report
from gilty.report.recording import tasks as task_view
from gilty.sampling.session import Recording, Session
from gilty.sampling.tasks import AWAITING, READY
from synthetic import HOLD, IDLE, BatchBuilder, make_session
from test_json_report import documented_keys, key_paths


def _session() -> Session:
    b = BatchBuilder(names={1: "MainThread"})
    helper = ("helper", "/srv/app.py", 12)
    sleep = ("sleep", "/py/asyncio/tasks.py", 665)
    chain = b.stack(sleep, helper, ("handler", "/srv/app.py", 20))
    running = b.stack(("compute", "/srv/app.py", 40), ("busy", "/srv/app.py", 41))
    thread = b.stack(
        ("compute", "/srv/app.py", 40), ("busy", "/srv/app.py", 41), ("run_forever", "/py/asyncio/base_events.py", 600)
    )
    batches = []
    for i in range(2):
        batch = b.batch([{1: (HOLD, thread)}] * 5 if i == 0 else [{1: (IDLE, thread)}] * 5)
        if i == 0:  # the task stacks are the sampler's stacks too, sent in the batch first using them
            batch["stacks"].update({sid: list(ids) for ids, sid in b._stacks.items()})
            batch["frames"].update({fid: frame for frame, fid in b._frames.items()})
        site = next(fid for fid, f in batch["frames"].items() if tuple(f) == helper) if i == 0 else None
        batch["tasks"] = {
            "passes": 5,
            "reads": 5,
            "counts": [(0, chain, AWAITING, 0, 5), (1, running, HOLD, -1, 5), (2, chain, READY, -1, 1)],
            "paths": {0: ["main", "req-1"], 1: ["busy"], 2: ["main", "req-2"]} if i == 0 else {},
            "awaits": {0: ("sleep", site)} if i == 0 else {},
            "lifetimes": [(0x10, "req-1", 0.01 * 5 * i, 0.01 * (5 * i + 4), 5), (0x20, "busy", 0.0, 0.04, 5)],
            "errors": {"torn_dropped": i, "unreadable": 0, "changed": 2, "running_unmatched": 0, "read_failed": 0},
        }
        batches.append(batch)
    return make_session(batches)


def test_batches_merge():
    view = _session().tasks
    assert view.passes == 10 and view.reads == 10
    assert view.samples == 22
    # req-1 was seen in both batches: one life from the first to the last pass.
    assert view.lifetimes[(0x10, "req-1")] == [0.0, 0.09, 10]
    assert view.errors["torn_dropped"] == 1 and view.errors["changed"] == 4


def test_report_keys_match_the_documentation():
    report = json.loads(json_report.render(_session()))
    present = key_paths({"tasks": report["tasks"]}) - {"tasks"}
    documented = documented_keys("Task view")
    # state_seconds is a map whose keys are state names (data).
    present = {p for p in present if not p.startswith("tasks.state_seconds.")}
    assert present - documented == set(), "in the report but not documented"
    assert documented - present == set(), "documented but missing from the report"


def test_report_values():
    t = json.loads(json_report.render(_session()))["tasks"]
    top = t["stacks"][0]
    assert top["path"] == ["main", "req-1"] and top["state"] == "awaiting" and top["samples"] == 10
    assert top["awaiting"] == {"kind": "sleep", "function": "helper", "file": "/srv/app.py", "line": 12}
    assert [f[0] for f in top["stack"]] == ["handler", "helper", "sleep"]
    assert t["state_seconds"] == {"awaiting": 0.1, "holding_gil": 0.1, "ready": 0.02}
    assert t["await_sites"][0]["share"] == pytest.approx(10 / 22, abs=1e-6)
    assert t["longest_lived"][0]["name"] == "req-1"


def test_saved_and_loaded():
    s = _session()
    again = Session.from_dict(json.loads(json.dumps(s.to_dict())))
    assert again.tasks.counts == s.tasks.counts and again.tasks.lifetimes == s.tasks.lifetimes
    bad = s.to_dict()
    bad["tasks"]["counts"].append([99, -1, AWAITING, -1, 1])
    with pytest.raises(ValueError, match="path"):
        Session.from_dict(bad)


def test_stack_formats_draw_the_task_view():
    rec = Recording.of(_session())
    lines = [ln for ln in collapsed.lines(rec) if ";asyncio tasks;" in ln]
    assert (
        "pid 4242 · python;asyncio tasks;task main;task req-1;handler (/srv/app.py:20);helper (/srv/app.py:12);"
        "sleep (/py/asyncio/tasks.py:665);awaiting sleep (/srv/app.py:12) 10"
        in [
            ln.replace(f"pid 4242 · {task_view.process_label(rec.sessions[0]).split(' · ', 1)[1]}", "pid 4242 · python")
            for ln in lines
        ]
    ), lines
    assert any(ln.endswith(";busy (/srv/app.py:41);compute (/srv/app.py:40);holding_gil 10") for ln in lines), lines
    assert any(ln.endswith(";ready 2") for ln in lines), lines
    prof = speedscope.profile_file(rec)
    tasks = [p for p in prof["profiles"] if p["name"].endswith("asyncio tasks")]
    assert len(tasks) == 1 and abs(sum(tasks[0]["weights"]) - 0.22) < 1e-9
    events = chrome_trace.trace(rec)["traceEvents"]
    assert sorted(e["name"] for e in events if e.get("cat") == "asyncio_task") == ["task busy", "task req-1"]


def test_text_report_has_the_task_section():
    from gilty.report.recording import text as console

    text = console.render(_session())
    assert "asyncio tasks: 2.2 per pass over 10 passes" in text, text
    assert "45.5%  awaiting sleep at helper (/srv/app.py:12)" in text, text
    assert "torn_dropped 1" in text


def test_a_task_name_is_shown_visibly():
    s = _session()
    s.tasks.paths[1] = ("\x1b[2Jevil",)
    labels = [lab for _s, lab, _n in task_view.rows(Recording.of(s))]
    assert any(lab[0] == "task \\x1b[2Jevil" for lab in labels), labels
