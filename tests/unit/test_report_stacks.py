"""Collapsed stacks, speedscope and the inferno SVG: the formats made of stacks and counts."""

import json
import xml.etree.ElementTree as ET

import pytest
from gilty.report.pictures import PictureOptions
from gilty.report.recording import collapsed, speedscope
from gilty.sampling.session import STATE_NAMES, Recording
from recordings import HOSTILE, one_process, two_processes, worker_session
from synthetic import HOLD, BatchBuilder, make_session


def parse_collapsed(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        stack, count = line.rsplit(" ", 1)
        out[stack] = int(count)
    return out


def test_collapsed_lines_are_process_thread_state_then_frames_outermost_first():
    lines = parse_collapsed(collapsed.render(one_process(), PictureOptions(idle=True)))
    key = "pid 4242 · python3.12;metrics (tid 2);holding_gil;run (threading.py:1010);spin (app.py:12)"
    assert key in lines
    # Every sample is counted once: the counts add up to passes x threads.
    assert sum(lines.values()) == 400 * 4


def test_pictures_leave_idle_out_unless_asked():
    rec = one_process()
    idle = sum(n for (_tid, state, _stack), n in rec.sessions[0].stack_counts().items() if state == 4)
    assert idle > 0
    default = parse_collapsed(collapsed.render(rec))
    assert not any(";idle" in k for k in default) and sum(default.values()) == 400 * 4 - idle
    doc = json.loads(speedscope.render(rec))
    names = {f["name"] for f in doc["shared"]["frames"]}
    used = {doc["shared"]["frames"][s[0]]["name"] for p in doc["profiles"] for s in p["samples"]}
    assert "idle" in names and "idle" not in used
    used = {
        doc["shared"]["frames"][s[0]]["name"]
        for p in json.loads(speedscope.render(rec, PictureOptions(idle=True)))["profiles"]
        for s in p["samples"]
    }
    assert "idle" in used


def test_collapsed_counts_match_the_sessions_stack_counts():
    rec = one_process()
    session = rec.sessions[0]
    lines = parse_collapsed(collapsed.render(rec))
    held = sum(n for (tid, state, _), n in session.stack_counts().items() if tid == 2 and state == 0)
    assert sum(n for k, n in lines.items() if ";metrics (tid 2);holding_gil;" in k) == held


def test_collapsed_escapes_separators_in_names():
    text = collapsed.render(Recording.of(worker_session()))
    for line in text.splitlines():
        stack, count = line.rsplit(" ", 1)
        assert count.isdigit()
        # process; thread; state; then only whole frames: a `;` inside a name would add a level.
        assert len(stack.split(";")) in (3, 5)
    assert "crunch (odd:name file.py:7)" in text
    assert HOSTILE in text  # collapsed is plain text: the name is kept as written


def test_collapsed_of_two_processes_has_both():
    lines = parse_collapsed(collapsed.render(two_processes()))
    pids = {k.split(";", 1)[0].split(" · ")[0] for k in lines}
    assert pids == {"pid 4242", "pid 5151"}


def test_speedscope_profile_per_process_and_thread_with_state_roots():
    doc = json.loads(speedscope.render(two_processes(), PictureOptions(idle=True)))
    frames = doc["shared"]["frames"]
    names = [p["name"] for p in doc["profiles"]]
    assert "pid 4242 · metrics (tid 2)" in names and "pid 5151 · worker (tid 10)" in names
    assert len(doc["profiles"]) == 4 + 2
    for p in doc["profiles"]:
        assert p["type"] == "sampled" and p["unit"] == "seconds"
        assert len(p["samples"]) == len(p["weights"])
        assert p["endValue"] == pytest.approx(sum(p["weights"]))
        for stack in p["samples"]:
            assert frames[stack[0]]["name"] in STATE_NAMES  # the root frame is the state
            assert all("file" in frames[i] and "line" in frames[i] for i in stack[1:])
    metrics = next(p for p in doc["profiles"] if p["name"] == "pid 4242 · metrics (tid 2)")
    spin = [w for s, w in zip(metrics["samples"], metrics["weights"]) if frames[s[-1]]["name"] == "spin"]
    held = sum(w for s, w in zip(metrics["samples"], metrics["weights"]) if frames[s[0]]["name"] == "holding_gil")
    assert sum(spin) == pytest.approx(4.0)  # 400 passes at 100 Hz
    assert held == pytest.approx(356 * 0.01)  # contention_session hands the GIL over 1 pass in 9


def test_speedscope_structure_by_hand():
    """The documented file format's required keys, checked without the schema (which needs npm)."""
    doc = json.loads(speedscope.render(one_process()))
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    assert isinstance(doc["shared"]["frames"], list)
    for f in doc["shared"]["frames"]:
        assert isinstance(f["name"], str)
    n = len(doc["shared"]["frames"])
    for p in doc["profiles"]:
        assert {"type", "name", "unit", "startValue", "endValue", "samples", "weights"} <= set(p)
        assert all(0 <= i < n for s in p["samples"] for i in s)


def test_svg_is_an_inferno_flame_graph_with_escaped_names():
    pytest.importorskip("gilty._native", reason="the SVG is drawn by the native extension (make setup)")
    from gilty.report.recording import svg as flamegraph_svg

    svg = flamegraph_svg.render(two_processes())
    root = ET.fromstring(svg)  # would fail on an unescaped `<` or `&`
    text = "".join(root.itertext())
    assert HOSTILE in text  # shown as text, after XML unescaping
    assert "spin (app.py:12)" in text and "worker (tid 10)" in text
    assert "gilty: 2 processes" in text
    assert not root.findall(".//{http://www.w3.org/2000/svg}img") and "<img" not in svg


def test_speedscope_leaves_out_a_line_that_could_not_be_read():
    # A frame read without its line (-1) was written "line": -1 (test_record_native saw it in a
    # clean clone); speedscope's line is optional.
    b = BatchBuilder(names={1: "MainThread"})
    stack = b.stack(("lost", "app.py", -1), ("main", "app.py", 3))
    doc = json.loads(speedscope.render(Recording.of(make_session([b.batch([{1: (HOLD, stack)}] * 10)]))))
    frames = {f["name"]: f for f in doc["shared"]["frames"]}
    assert "line" not in frames["lost"] and frames["main"]["line"] == 3, frames
