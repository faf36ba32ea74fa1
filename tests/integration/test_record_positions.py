"""Column ranges in `gilty record`: the position of the instruction a sampled frame stands on, kept
beside the frames (stacks stay keyed by line), in the JSON report, the saved recording, speedscope's
frames and the HTML page's frame table, against what `dis` gives in the same interpreter (3.11+;
3.10's line table has lines only)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from conftest import TARGETS, line_of, record_json, run_gilty, running_target, thread_named
from test_dump_positions import DIS_CALLS

pytestmark = pytest.mark.interpreter

SCRIPT = "positions.py"


@pytest.fixture(scope="module")
def recorded(interp, tmp_path_factory):
    """(report, path of the saved report) of a short recording of the positions target."""
    with running_target(interp, SCRIPT) as proc:
        report = record_json(proc.pid, duration=1.0, rate=200)
    path = tmp_path_factory.mktemp("positions") / "rec.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    return report, path


def dis_position(interp) -> list:
    """[line, end_line, column, end_column] of the sleeping call, as the interpreter's `dis` gives it."""
    found = json.loads(
        subprocess.run(
            [interp.path, "-I", "-c", DIS_CALLS, str(TARGETS / SCRIPT), str(line_of(SCRIPT, "call"))],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert len(found) == 1, found
    return found[0]


def comprehension_function(report: dict) -> dict:
    """The top function of the sleeping thread (the comprehension, or 3.11's `<listcomp>` in it)."""
    thread = thread_named(report, "comprehension")
    functions = [f for f in thread["top_functions"] if f["function"] is not None]
    assert functions, thread["top_functions"]
    return functions[0]


# Guards: positions not carried from the sampler into the report (or taken from another frame or
# instruction), a multi-line call's end line lost, and 3.10 claiming columns it cannot know.
def test_top_function_position_matches_dis(interp, recorded):
    report, _path = recorded
    top = comprehension_function(report)
    assert top["line"] == line_of(SCRIPT, "call"), top
    if interp.version[:2] == (3, 10):
        assert top["position"] is None, top
        assert not report["recording"]["processes"][0]["frame_positions"], "3.10 has no column ranges"
        pytest.skip("3.10: its line table has lines only, so record gives no column range (position is null)")
    line, end_line, column, end_column = dis_position(interp)
    assert end_line > line, "the call is split over lines"
    assert top["position"] == {"line": line, "end_line": end_line, "column": column, "end_column": end_column}, top


# Guards: the saved recording losing positions (the report re-rendered from it would have none), and
# speedscope's frame not getting the instruction's column (1-based `col`) beside its line.
def test_speedscope_frame_has_the_column(interp, recorded, tmp_path):
    _report, path = recorded
    out = tmp_path / "rec.speedscope.json"
    rc, _out, err = run_gilty("report", path, "--idle", "-o", out, timeout=60)
    assert rc == 0, err
    frames = json.loads(out.read_text(encoding="utf-8"))["shared"]["frames"]
    call_line = line_of(SCRIPT, "call")
    mine = [f for f in frames if f.get("file", "").endswith(SCRIPT) and f.get("line") == call_line]
    assert mine, frames
    if interp.version[:2] == (3, 10):
        assert all("col" not in f for f in frames), frames
        pytest.skip("3.10: lines only, speedscope frames carry no col")
    _line, _end_line, column, _end_column = dis_position(interp)
    assert all(f["col"] == column + 1 for f in mine), mine


# Guards: the HTML page's frame table without positions (its tooltips would show lines only).
def test_html_frame_table_has_the_position(interp, recorded, tmp_path):
    _report, path = recorded
    out = tmp_path / "rec.html"
    rc, _out, err = run_gilty("report", path, "--idle", "-o", out, timeout=60)
    assert rc == 0, err
    page = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="gilty-data">(.*?)</script>', page, re.S).group(1))
    call_line = line_of(SCRIPT, "call")
    mine = [f for f in data["frames"] if f[1].endswith(SCRIPT) and f[2] == call_line]
    assert mine, data["frames"]
    if interp.version[:2] == (3, 10):
        assert all(len(f) == 3 for f in data["frames"]), data["frames"]
        pytest.skip("3.10: lines only, the page's frames carry no position")
    assert all(f[3] == dis_position(interp) for f in mine), mine


# Guards: the page's script not showing the columns in the flame graph's tooltip, or showing them
# 0-based or with the end line lost (what a person reads: "positions.py:12:9-14:10").
def test_flame_graph_tooltip_shows_the_columns(interp, recorded, tmp_path, browser):
    if interp.id.startswith("debian") or interp.minor_str != "3.12":
        pytest.skip("the page's script does not depend on the recording's version: checked on pyenv 3.12 only (suite time)")
    _report, path = recorded
    page = tmp_path / "rec.html"
    rc, _out, err = run_gilty("report", path, "--idle", "-o", page, timeout=60)
    assert rc == 0, err
    line, end_line, column, end_column = dis_position(interp)
    browser.open(page)
    assert browser.js("document.body.dataset.ready") == "1", "the report's script did not finish"
    titles = browser.js("Array.from(document.querySelectorAll('#flamegraph .frame')).map(e => e.title)")
    assert browser.errors() == []
    want = f"{SCRIPT}:{line}:{column + 1}-{end_line}:{end_column})"
    assert any(t.split("\n")[0].endswith(want) for t in titles), (want, titles)
