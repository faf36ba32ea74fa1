"""The Firefox Profiler's Gecko profile (``.gecko.json``): tables that match their schemas, indices
inside their tables, samples in time, and gilty's states as markers that add up to each state's time."""

from __future__ import annotations

import json

import pytest
from gilty.report import format_for_path, output_format, render
from gilty.report.recording import gecko
from gilty.report.recording import json as json_report
from gilty.sampling.session import STATE_NAMES, Recording
from recordings import HOSTILE, one_process, thread_pool, two_processes
from synthetic import CPU_WAIT, GC, HOLD, IDLE, NATIVE, UNKNOWN, WAIT, BatchBuilder, make_session

TABLES = ("samples", "stackTable", "frameTable", "markers")


def every_state() -> Recording:
    """One thread through all seven states, a stretch of each, then back to holding the GIL."""
    b = BatchBuilder(names={7: "walker"})
    stack = b.stack(("step", "/srv/walk.py", 5), ("main", "/srv/walk.py", 50))
    plan = [HOLD] * 5 + [GC] * 3 + [WAIT] * 4 + [NATIVE] * 6 + [IDLE] * 7 + [UNKNOWN] * 2 + [CPU_WAIT] * 3 + [HOLD] * 4
    passes = [{7: (state, stack, 230) if state == IDLE else (state, stack)} for state in plan]
    return Recording.of(make_session([b.batch(passes)]))


def doc(rec: Recording) -> dict:
    return json.loads(render(rec, "gecko"))


def thread(document: dict, tid: int) -> dict:
    return next(t for t in document["threads"] if t["tid"] == tid)


def markers(t: dict, schema_type: str) -> list:
    """[(name, start, end, data)] of a thread's markers of one type."""
    m = t["markers"]["schema"]
    return [
        (t["stringTable"][row[m["name"]]], row[m["startTime"]], row[m["endTime"]], row[m["data"]])
        for row in t["markers"]["data"]
        if row[m["data"]]["type"] == schema_type
    ]


@pytest.mark.parametrize("make", [one_process, two_processes, thread_pool, every_state])
def test_tables_match_their_schemas_and_indices_stay_inside(make):
    d = doc(make())
    categories = d["meta"]["categories"]
    for t in d["threads"]:
        for name in TABLES:
            table = t[name]
            columns = sorted(table["schema"].values())
            assert columns == list(range(len(columns))), (name, table["schema"])
            assert all(len(row) == len(columns) for row in table["data"]), name
        strings, frames, stacks = t["stringTable"], t["frameTable"], t["stackTable"]
        assert all(isinstance(s, str) for s in strings)
        f = frames["schema"]
        for row in frames["data"]:
            assert 0 <= row[f["location"]] < len(strings)
            assert 0 <= row[f["category"]] < len(categories)
            assert 0 <= row[f["subcategory"]] < len(categories[row[f["category"]]]["subcategories"])
        s = stacks["schema"]
        for i, row in enumerate(stacks["data"]):
            assert 0 <= row[s["frame"]] < len(frames["data"])
            # A prefix comes before its stack: the stack table is a tree read in one pass.
            assert row[s["prefix"]] is None or 0 <= row[s["prefix"]] < i
        sm = t["samples"]["schema"]
        assert all(0 <= row[sm["stack"]] < len(stacks["data"]) for row in t["samples"]["data"])
        m = t["markers"]["schema"]
        for row in t["markers"]["data"]:
            assert 0 <= row[m["name"]] < len(strings)
            assert 0 <= row[m["category"]] < len(categories)
            assert row[m["phase"]] == gecko.INTERVAL and row[m["startTime"]] <= row[m["endTime"]]
            assert row[m["data"]]["type"] in {s["name"] for s in d["meta"]["markerSchema"]}


@pytest.mark.parametrize("make", [one_process, two_processes, every_state])
def test_sample_times_increase_and_lie_within_the_recording(make):
    rec = make()
    d = doc(rec)
    end = d["meta"]["profilingEndTime"]
    assert end == pytest.approx(gecko.recording_length(rec) * 1000)
    for t in d["threads"]:
        times = [row[t["samples"]["schema"]["time"]] for row in t["samples"]["data"]]
        assert times and all(a < b for a, b in zip(times, times[1:])), t["name"]
        assert 0 <= times[0] and times[-1] < end
        m = t["markers"]["schema"]
        assert all(0 <= row[m["startTime"]] and row[m["endTime"]] <= end + 1e-6 for row in t["markers"]["data"])


def test_meta_says_what_the_importer_needs():
    rec = one_process()
    meta = doc(rec)["meta"]
    assert meta["version"] == gecko.GECKO_VERSION
    assert meta["interval"] == pytest.approx(10.0)  # 100 Hz
    assert meta["startTime"] == pytest.approx(rec.start_time * 1000)
    assert meta["presymbolicated"] is True
    assert meta["categories"][0]["color"] == "grey"  # the viewer's default category
    assert {c["name"] for c in meta["categories"]} >= {"Holding the GIL", "Waiting for the GIL", "Idle"}
    d = doc(rec)
    assert d["processes"] == [] and d["libs"] == [] and d["pausedRanges"] == []


def test_state_markers_cover_every_state_with_its_time():
    rec = every_state()
    period_ms = 10.0
    t = doc(rec)["threads"][0]
    states = markers(t, gecko.STATE_SCHEMA)
    assert [name for name, *_ in states] == list(STATE_NAMES) + ["holding_gil"]
    expected = {"holding_gil": 9, "gc": 3, "waiting_gil": 4, "native": 6, "idle": 7, "unknown": 2, "cpu_wait": 3}
    for name, samples in expected.items():
        total = sum(end - start for n, start, end, _d in states if n == name)
        assert total == pytest.approx(samples * period_ms, abs=period_ms), name
        assert sum(d["samples"] for n, _s, _e, d in states if n == name) == samples
    # The markers tile the thread's time, in order.
    for a, b in zip(states, states[1:]):
        assert a[2] == pytest.approx(b[1])
    idle = next(d for n, _s, _e, d in states if n == "idle")
    assert idle["syscall"] == "clock_nanosleep"
    # on CPU: holding, gc, native; cpu_wait (runnable, no CPU) is not.
    cpu = markers(t, gecko.CPU_SCHEMA)
    assert [(start, end) for _n, start, end, _d in cpu] == [(0.0, pytest.approx(80.0)), (120.0, 180.0), (300.0, 340.0)]
    assert [d["samples"] for *_x, d in cpu] == [8, 6, 4]
    assert {n for n, *_ in cpu} == {gecko.ON_CPU}


def test_samples_are_rooted_at_their_state_in_its_category():
    t = doc(every_state())["threads"][0]
    f, s, sm = t["frameTable"]["schema"], t["stackTable"]["schema"], t["samples"]["schema"]
    categories = [c["name"] for c in doc(every_state())["meta"]["categories"]]

    def path(stack):
        out = []
        while stack is not None:
            frame = t["frameTable"]["data"][t["stackTable"]["data"][stack][s["frame"]]]
            out.append((t["stringTable"][frame[f["location"]]], categories[frame[f["category"]]], frame[f["line"]]))
            stack = t["stackTable"]["data"][stack][s["prefix"]]
        return out[::-1]

    rows = t["samples"]["data"]
    assert len(rows) == 34
    first = path(rows[0][sm["stack"]])
    assert first == [
        ("holding_gil", "Holding the GIL", None),
        ("main (/srv/walk.py:50)", "Holding the GIL", 50),
        ("step (/srv/walk.py:5)", "Holding the GIL", 5),
    ]
    assert path(rows[8][sm["stack"]])[0] == ("waiting_gil", "Waiting for the GIL", None)
    assert path(rows[18][sm["stack"]])[0] == ("idle", "Idle", None)
    assert path(rows[18][sm["stack"]])[-1][1] == "Idle"


def test_same_threads_as_the_json_report():
    rec = two_processes()
    report = json.loads(json_report.render_recording(rec))
    d = doc(rec)
    want = {(t["pid"], t["tid"]): t for t in report["threads"]}
    got = {(t["pid"], t["tid"]): t for t in d["threads"]}
    assert set(got) == set(want)
    for key, t in got.items():
        assert t["name"] == want[key]["name"]
        assert len(t["samples"]["data"]) == want[key]["samples"]
        # Each state's markers add up to its share of the thread's samples, within one period.
        states = markers(t, gecko.STATE_SCHEMA)
        for name, share in want[key]["states"].items():
            total = sum(end - start for n, start, end, _d in states if n == name)
            assert total == pytest.approx(share * want[key]["samples"] * 10.0, abs=10.0), (key, name)
    assert {t["processName"] for t in d["threads"]} == {"python 4242 python3.12", "python 5151 python3.12"}


def test_names_from_the_target_stay_data():
    # A hostile function name is a string in the table, the file still JSON; render() makes it visible.
    d = doc(two_processes())
    worker = thread(d, 10)
    assert any(HOSTILE in s for s in worker["stringTable"])


def test_the_extension_picks_the_format():
    assert format_for_path("run.gecko.json") == "gecko"
    assert format_for_path("RUN.GECKO.JSON") == "gecko"
    assert format_for_path("run.json") == "json"
    assert output_format("gecko", "anything.json") == "gecko"


def test_cpu_deltas_count_the_time_on_a_cpu():
    # The activity graph's height: µs of CPU since the previous sample, all of it for a sample that
    # ran (holding, gc, native), none otherwise; the first sample's delta is ignored by the viewer.
    d = doc(every_state())
    assert d["meta"]["sampleUnits"]["threadCPUDelta"] == "µs"
    t = d["threads"][0]
    sm = t["samples"]["schema"]
    deltas = [row[sm["threadCPUDelta"]] for row in t["samples"]["data"]]
    on_cpu = sum(end - start for _n, start, end, _d in markers(t, gecko.CPU_SCHEMA))
    assert sum(deltas[1:]) / 1000 == pytest.approx(on_cpu - 10.0)  # less the first sample's period
    assert deltas[8:12] == [0, 0, 0, 0]  # waiting for the GIL
    assert deltas[12:18] == [pytest.approx(10_000)] * 6  # native: the whole 10 ms period


def test_c_frames_are_named_in_their_library():
    # `record --native`: a C frame's line is -2 - offset, its file "library/source:line" (or the library).
    b = BatchBuilder(names={3: "zipper"})
    stack = b.stack(
        ("deflate_slow", "libz.so.1/deflate.c:1720", -2 - 0x4A0),
        ("libz.so.1+0x99", "libz.so.1", -2 - 0x99),
        ("compress", "/srv/zip.py", 8),
    )
    rec = Recording.of(make_session([b.batch([{3: (NATIVE, stack)}] * 3)]))
    t = doc(rec)["threads"][0]
    f = t["frameTable"]["schema"]
    frames = {t["stringTable"][row[f["location"]]]: row[f["line"]] for row in t["frameTable"]["data"]}
    assert frames == {
        "native": None,
        "compress (/srv/zip.py:8)": 8,
        "libz.so.1+0x99 (in libz.so.1)": None,
        "deflate_slow (in libz.so.1)": 1720,
    }


def test_a_thread_not_seen_for_a_while_is_not_said_to_have_run_meanwhile():
    b = BatchBuilder(names={1: "main", 2: "burst"})
    passes = [{1: IDLE, **({2: HOLD} if i < 3 or i >= 50 else {})} for i in range(60)]
    t = thread(doc(Recording.of(make_session([b.batch(passes)]))), 2)
    sm = t["samples"]["schema"]
    deltas = [row[sm["threadCPUDelta"]] for row in t["samples"]["data"]]
    assert len(deltas) == 13 and deltas[3] == pytest.approx(10_000)  # one period after the gap, not 47
