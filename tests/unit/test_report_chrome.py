"""Chrome trace events: metadata, one slice per state run, the GIL owner track, exact GC pauses."""

import json

import pytest
from gilty.report.recording import chrome_trace
from gilty.sampling.session import Recording
from recordings import one_process, two_processes
from test_json_report import exact_session


def events(rec):
    doc = json.loads(chrome_trace.render(rec))
    assert doc["displayTimeUnit"] in ("ms", "ns")
    return doc["traceEvents"]


def test_every_event_has_the_required_fields():
    for e in events(two_processes()):
        assert {"ph", "name", "pid", "tid"} <= set(e)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0


def test_process_and_thread_names():
    evs = events(two_processes())
    procs = {e["pid"]: e["args"]["name"] for e in evs if e["name"] == "process_name"}
    assert procs == {4242: "python 4242 python3.12", 5151: "python 5151 python3.12"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["name"] == "thread_name"}
    assert threads[(4242, 2)] == "metrics (tid 2)"
    assert threads[(4242, chrome_trace.GIL_OWNER_TID)] == "GIL owner"


def test_state_slices_tile_each_threads_time():
    rec = one_process()
    evs = [e for e in events(rec) if e["ph"] == "X" and e["tid"] == 2]
    # metrics: 8 passes holding, 1 waiting, over and over; slices follow each other without gaps.
    assert [e["name"] for e in evs[:3]] == ["holding_gil", "waiting_gil", "holding_gil"]
    assert evs[0]["ts"] == 0 and evs[0]["dur"] == pytest.approx(80_000)
    for a, b in zip(evs, evs[1:]):
        assert a["ts"] + a["dur"] == pytest.approx(b["ts"])
    assert "args" not in evs[0]  # the stack is on the thread's stack track, not repeated here
    assert sum(e["dur"] for e in evs) == pytest.approx(4_000_000)


def test_stack_track_nests_frames_over_time():
    rec = one_process()
    evs = events(rec)
    track = 2 + chrome_trace.STACK_TRACK
    frames = [e for e in evs if e["ph"] == "X" and e["tid"] == track]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["name"] == "thread_name"}
    assert names[(4242, track)] == "metrics (tid 2) stack"
    # metrics spins in spin() under run() all the time, holding or waiting: one slice per frame,
    # not one per state run; run() encloses spin().
    assert [(e["name"], e["ts"], e["dur"]) for e in frames] == [
        ("run (threading.py:1010)", 0, pytest.approx(4_000_000)),
        ("spin (app.py:12)", 0, pytest.approx(4_000_000)),
    ]
    assert_nested(evs)


def assert_nested(evs):
    """Slices on one track nest: each starts and ends inside any slice still open when it starts."""
    by_track: dict = {}
    for e in evs:
        if e["ph"] == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track, slices in by_track.items():
        stack: list = []
        for e in sorted(slices, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + 1e-3:
                stack.pop()
            if stack:
                parent = stack[-1]
                assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + 1e-3, (track, parent, e)
            stack.append(e)


def test_idle_slices_name_the_syscall():
    evs = [e for e in events(one_process()) if e["ph"] == "X" and e["tid"] == 1]
    assert evs and all(e["name"] == "idle" and e["args"]["syscall"] == "futex" for e in evs)


def test_gil_owner_track_names_the_holder():
    evs = [e for e in events(one_process()) if e["ph"] == "X" and e["tid"] == chrome_trace.GIL_OWNER_TID]
    assert [e["name"] for e in evs[:3]] == ["metrics", "io-1", "metrics"]
    assert evs[1]["args"] == {"tid": 3, "state": "holding_gil"}
    # One holder at a time: slices on the track never overlap.
    for a, b in zip(evs, evs[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3


def test_gc_runs_are_gc_slices():
    evs = events(two_processes())
    gc = [e for e in evs if e["ph"] == "X" and e["pid"] == 5151 and e["cat"] == "gc"]
    assert {e["tid"] for e in gc} == {10, chrome_trace.GIL_OWNER_TID}
    assert any(e["name"] == "worker (gc)" for e in gc)


def test_exact_gc_pauses_get_their_own_track():
    evs = events(Recording.of(exact_session()))
    gc = [e for e in evs if e["ph"] == "X" and e["tid"] == chrome_trace.EXACT_GC_TID]
    assert len(gc) == 1
    assert gc[0]["name"] == "gc gen 2" and gc[0]["ts"] == pytest.approx(500_000) and gc[0]["dur"] == pytest.approx(10_000)
    assert any(e["name"] == "thread_name" and e["args"]["name"] == "GC (exact)" for e in evs)


def test_no_exact_track_without_exact_mode():
    assert not [e for e in events(one_process()) if e["tid"] == chrome_trace.EXACT_GC_TID]
