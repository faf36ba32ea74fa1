"""Stack slots (gilty.sampling.stack_slots): counts per stack per stretch of time, kept bounded,
saved and loaded, and what speedscope and the HTML page make of them."""

from __future__ import annotations

import json

import pytest
from gilty.report.recording import html as html_report
from gilty.report.recording import speedscope
from gilty.sampling import stack_slots
from gilty.sampling.session import Recording, Session
from synthetic import HOLD, IDLE, BatchBuilder, make_session


def phases_session(batches: int = 6, per_batch: int = 10):
    """One thread: stack A in the first half of the batches, then B; a second thread idle throughout."""
    b = BatchBuilder(names={1: "MainThread", 2: "sleeper"})
    a = b.stack(("phase_a", "app.py", 3), ("main", "app.py", 9))
    bb = b.stack(("phase_b", "app.py", 6), ("main", "app.py", 10))
    out = []
    for k in range(batches):
        stack = a if k < batches // 2 else bb
        out.append(b.batch([{1: (HOLD, stack), 2: IDLE} for _ in range(per_batch)]))
    return make_session(out)


def test_one_slot_per_batch_in_time_order_with_the_same_totals():
    s = phases_session()
    assert len(s.stack_slots) == 6 and list(s.stack_slots.first) == [0, 10, 20, 30, 40, 50]
    total: dict = {}
    for counts in s.stack_slots.counts:
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    assert total == s.counts
    spans = stack_slots.slot_spans(s)
    assert spans[0][0] == 0.0 and all(a[1] == pytest.approx(b[0]) for a, b in zip(spans, spans[1:]))


def test_past_max_slots_neighbours_merge_and_totals_stay(monkeypatch):
    monkeypatch.setattr(stack_slots, "MAX_SLOTS", 4)
    s = phases_session(batches=11, per_batch=2)
    slots = s.stack_slots
    assert len(slots) <= 4 and slots.width == 4
    assert list(slots.first) == [0, 8, 16]  # 4 + 4 + 3 batches of 2 passes
    assert sum(n for c in slots.counts for n in c.values()) == sum(s.counts.values())


def test_saved_and_loaded_alike_and_refused_when_damaged():
    s = phases_session()
    data = json.loads(json.dumps(s.to_dict()))
    back = Session.from_dict(data)
    assert list(back.stack_slots.first) == list(s.stack_slots.first)
    assert back.stack_slots.counts == s.stack_slots.counts
    for damage in (
        {"width": 1, "first": [0, 0], "counts": [[], []]},
        {"width": 1, "first": [0], "counts": [[1, 0, 99999, 3]]},
        {"width": 1, "first": [0], "counts": [[1, 0, -1]]},
        {"width": 1, "first": [0], "counts": [[1, 42, -1, 3]]},
        {"first": [0]},
        [1, 2],
    ):
        with pytest.raises(ValueError):
            Session.from_dict({**data, "stack_slots": damage})
    # A recording saved before stack slots: loads, and speedscope draws it one stack a sample.
    old = Session.from_dict({k: v for k, v in data.items() if k != "stack_slots"})
    assert old.stack_slots is None
    doc = speedscope.profile_file(Recording.of(old))
    assert len(doc["profiles"]) == 1


def test_speedscope_time_order_and_no_idle_profile():
    doc = speedscope.profile_file(Recording.of(phases_session()))
    # The idle sleeper has nothing drawn: no profile to click through.
    assert [p["name"].split(" · ")[1] for p in doc["profiles"]] == ["MainThread (tid 1)"]
    frames = doc["shared"]["frames"]
    p = doc["profiles"][0]
    names = [frames[s[-1]]["name"] for s in p["samples"]]
    # One sample per phase: a stack going on from slot to slot is one sample.
    assert names == ["phase_a", "phase_b"]
    assert p["weights"] == pytest.approx([0.3, 0.3])


def test_html_page_slots_bounded(monkeypatch):
    rec = Recording.of(phases_session(batches=40, per_batch=3))
    monkeypatch.setattr(html_report, "PAGE_SLOTS", 8)
    edges, series = html_report.page_slots(rec)[0]
    assert len(edges) == 9 and edges == sorted(edges)
    assert sum(series[key][i + 1] for key in series for i in range(0, len(series[key]), 2)) == sum(
        rec.sessions[0].counts.values()
    )
    # Over the page's budget of (slot, samples) pairs, slots get coarser, never below MIN_PAGE_SLOTS.
    monkeypatch.setattr(html_report, "PAGE_SLOT_VALUES", 4)
    monkeypatch.setattr(html_report, "MIN_PAGE_SLOTS", 2)
    edges, series = html_report.page_slots(rec)[0]
    assert len(edges) == 3
    data = html_report.page_data(rec)["processes"][0]
    assert len(data["stack_slots"]) == len(data["stacks"])


def test_chrome_trace_stack_track_follows_the_slots_within_one_run():
    from gilty.report.recording import chrome_trace

    s = phases_session()
    assert len(s.thread_runs[1]) == 1  # one state throughout: one run, holding phase_a's stack
    events = chrome_trace.trace(Recording.of(s))["traceEvents"]
    track = [e for e in events if e.get("cat") == "stack" and e["tid"] == 1 + chrome_trace.STACK_TRACK]
    a = [e for e in track if e["name"].startswith("phase_a (")]
    b = [e for e in track if e["name"].startswith("phase_b (")]
    assert len(a) == 1 and len(b) == 1, [e["name"] for e in track]
    assert a[0]["ts"] + a[0]["dur"] == b[0]["ts"] == 300_000  # the fourth slot's edge, 30 passes at 100 Hz
    main = [e for e in track if e["name"].startswith("main (")]
    assert len(main) == 2  # main() at another line in each phase
