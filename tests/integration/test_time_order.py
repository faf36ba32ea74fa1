"""Stacks over time (issue 16): a real target whose thread runs phase_a() and then phase_b()
(tests/targets/two_phases.py, one state throughout, only the stack tells the phases apart).

speedscope's samples must come in time order (every phase_a sample before any phase_b one) with
weights that still add up to the recording's counts; in headless Chromium, dragging over the HTML
timeline's second half must redraw the flame graph with phase_b and without phase_a, and
"Whole recording" must bring the whole back, for one process and for merged forked workers.
Screenshots are kept in the test's tmp dir.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from conftest import TARGETS, run_gilty
from formats_support import recording_interpreter, speedscope_schema

PHASE_S = 1.5
WORKERS = 2


def _record(out: Path, *extra) -> Path:
    interp = recording_interpreter()
    rec = out / "rec.json"
    rc, _out, err = run_gilty(
        "record",
        "--rate",
        200,
        *extra,
        "-o",
        rec,
        "--",
        interp.path,
        TARGETS / "two_phases.py",
        PHASE_S,
        *(("--workers", WORKERS) if "-s" in extra else ()),
    )
    assert rc == 0, err
    return rec


@pytest.fixture(scope="module")
def one_thread(tmp_path_factory):
    out = tmp_path_factory.mktemp("phases")
    rec = _record(out)
    paths = {"json": rec}
    for fmt, name in (("speedscope", "rec.speedscope.json"), ("html", "rec.html"), ("chrome", "rec.trace.json")):
        rc, _out, err = run_gilty("report", rec, "-o", out / name)
        assert rc == 0, err
        paths[fmt] = out / name
    return paths


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    out = tmp_path_factory.mktemp("phases-workers")
    rec = _record(out, "-s")
    page = out / "rec.html"
    rc, _out, err = run_gilty("report", rec, "-o", page)
    assert rc == 0, err
    return {"json": rec, "html": page}


# -- speedscope ------------------------------------------------------------------------------


def test_speedscope_lists_phase_a_before_phase_b_with_the_recorded_weights(one_thread, pytestconfig):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed (requirements-dev.txt)")
    cache = getattr(pytestconfig, "cache", None)
    folder = cache.mkdir("gilty-speedscope") if cache is not None else Path(tempfile.mkdtemp(prefix="gilty-speedscope-"))
    doc = json.loads(one_thread["speedscope"].read_text())
    jsonschema.validate(doc, speedscope_schema(folder))
    frames = doc["shared"]["frames"]
    active = doc["profiles"][doc["activeProfileIndex"]]
    # The main thread (no threading import: named after the process), the only one.
    assert len(doc["profiles"]) == 1, [p["name"] for p in doc["profiles"]]

    def where(function):
        return [i for i, s in enumerate(active["samples"]) if any(frames[f]["name"] == function for f in s)]

    a, b = where("phase_a"), where("phase_b")
    assert a and b, [[frames[f]["name"] for f in s] for s in active["samples"]]
    assert max(a) < min(b), (a, b)
    # Time order does not change the totals (left heavy, sandwich): per function, the weights add
    # up to the recording's sample counts times the period.
    rec = json.loads(one_thread["json"].read_text())
    proc = rec["recording"]["processes"][0]
    period = 1.0 / proc["rate_hz"]
    main = str(proc["target"]["pid"])
    assert f"(tid {main})" in active["name"], active["name"]
    for function, index in (("phase_a", a), ("phase_b", b)):
        samples = sum(
            n
            for tid, state, stack_id, n in proc["counts"]
            if str(tid) == main
            and state != 4
            and stack_id >= 0
            and any(proc["frames"][str(f)][0] == function for f in proc["stacks"][str(stack_id)])
        )
        weight = sum(active["weights"][i] for i in index)
        assert weight == pytest.approx(samples * period, rel=1e-9), function
    assert active["endValue"] == pytest.approx(sum(active["weights"]))


def test_chrome_trace_stack_track_moves_from_phase_a_to_phase_b(one_thread):
    doc = json.loads(one_thread["chrome"].read_text())
    stacks = [e for e in doc["traceEvents"] if e["ph"] == "X" and e.get("cat") == "stack"]
    a = [e for e in stacks if e["name"].startswith("phase_a (")]
    b = [e for e in stacks if e["name"].startswith("phase_b (")]
    # One state throughout: a run alone would give the whole recording phase_a's stack.
    assert a and b, sorted({e["name"] for e in stacks})
    assert max(e["ts"] for e in a) < min(e["ts"] for e in b)
    assert sum(e["dur"] for e in b) > 0.5 * PHASE_S * 1e6


# -- HTML time range in Chromium -------------------------------------------------------------


FRAMES_JS = "Array.from(document.querySelectorAll('#flamegraph .frame')).map(e => e.textContent)"
TOTAL_JS = "Number(document.querySelector('#flamegraph .frame[data-depth=\"0\"]').title.split('\\n')[1].split(' ')[0])"


def functions(browser) -> set:
    return {f.split(" (", 1)[0] for f in browser.js(FRAMES_JS)}


def drag(browser, start: float, end: float) -> None:
    """A real mouse drag over the first timeline track, from share ``start`` to ``end`` of its width."""
    browser.js("document.querySelector('#timeline .tl-track').scrollIntoView({block: 'center'})")
    left, top, width, height = browser.js(
        "(() => { const r = document.querySelector('#timeline .tl-track').getBoundingClientRect();"
        " return [r.left, r.top, r.width, r.height]; })()"
    )
    y = top + height / 2
    x0, x1 = left + start * width, left + end * width
    browser.call("Input.dispatchMouseEvent", type="mousePressed", x=x0, y=y, button="left", buttons=1, clickCount=1)
    for i in range(1, 6):
        browser.call("Input.dispatchMouseEvent", type="mouseMoved", x=x0 + (x1 - x0) * i / 5, y=y, button="left", buttons=1)
    browser.call("Input.dispatchMouseEvent", type="mouseReleased", x=x1, y=y, button="left", buttons=0, clickCount=1)


def click_button(browser, selector: str) -> None:
    x, y = browser.js(
        f"(() => {{ const e = document.querySelector('{selector}'); e.scrollIntoView({{block: 'center'}});"
        " const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()"
    )
    browser.click(x, y)


def select_phase_b_and_reset(browser, page: Path, shots: str) -> None:
    from test_gunicorn_outputs import screenshot

    browser.open(page)
    assert browser.js("document.body.dataset.ready") == "1"
    assert browser.errors() == []
    whole = browser.js(TOTAL_JS)
    assert {"phase_a", "phase_b"} <= functions(browser)
    assert browser.js("document.getElementById('range-reset').disabled") is True
    screenshot(browser, page.with_name(f"{shots}-whole.png"))
    # The second phase is the recording's second half (less start-up): its last quarter is phase_b only.
    drag(browser, 0.72, 0.97)
    assert browser.errors() == []
    label = browser.js("document.getElementById('range-label').textContent")
    assert label.startswith("Showing "), label
    ranged = browser.js(TOTAL_JS)
    shown = functions(browser)
    assert 0 < ranged < whole, (ranged, whole)
    assert "phase_b" in shown and "phase_a" not in shown, shown
    first = browser.js("document.querySelector('#self-time-table tbody tr td').textContent")
    assert first.startswith("phase_b ("), first
    assert not browser.js(
        "Array.from(document.querySelectorAll('#self-time-table td.name')).some(td => td.textContent.startsWith('phase_a ('))"
    )
    browser.js("document.getElementById('flame-section').scrollIntoView()")
    screenshot(browser, page.with_name(f"{shots}-phase-b.png"))
    click_button(browser, "#range-reset")
    assert browser.js(TOTAL_JS) == whole
    assert {"phase_a", "phase_b"} <= functions(browser)
    assert browser.js("document.getElementById('range-label').textContent") == ""
    assert browser.errors() == []


def test_html_time_range_shows_only_phase_b_and_resets(browser, one_thread):
    select_phase_b_and_reset(browser, one_thread["html"], "one-thread")


def test_html_time_range_with_merged_workers(browser, workers):
    page = workers["html"]
    rec = json.loads(workers["json"].read_text())
    assert len(rec["recording"]["processes"]) == 1 + WORKERS, [p["target"]["pid"] for p in rec["recording"]["processes"]]
    # All processes: the idle master draws nothing (idle is off), the workers' phases do.
    select_phase_b_and_reset(browser, page, "workers")
    # The two workers as one choice (merged), then a range: still only phase_b, from both workers.
    options = browser.js("Array.from(document.querySelectorAll('#filter-process option')).map(o => [o.value, o.textContent])")
    merged = [v for v, text in options if text.startswith(f"{WORKERS} workers of pid ")]
    assert len(merged) == 1 and len(merged[0].split(",")) == WORKERS, options
    browser.js(
        f"(() => {{ const s = document.getElementById('filter-process'); s.value = '{merged[0]}';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    whole = browser.js(TOTAL_JS)
    drag(browser, 0.72, 0.97)
    shown = functions(browser)
    assert "phase_b" in shown and "phase_a" not in shown, shown
    assert 0 < browser.js(TOTAL_JS) < whole
    assert browser.errors() == []


# -- compare of two recordings of several processes -------------------------------------------


def test_compare_of_two_subprocess_recordings_keeps_roles_apart(workers, tmp_path):
    again = _record(tmp_path, "-s")
    rc, out, err = run_gilty("compare", workers["json"], again, "--format", "json")
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    scopes = {r["scope"] for r in rows}
    # The master's main thread (waiting for its workers) and the workers' (spinning) are rows of their own.
    assert any(s.startswith("master thread ") for s in scopes) and any(s.startswith("worker thread ") for s in scopes), scopes
    assert not any(s.startswith("thread ") for s in scopes), scopes
    assert "role worker" in scopes, scopes
    util = {r["scope"]: r["a"] for r in rows if r["metric"] == "gil_utilisation"}
    assert util["role worker"] > util["recording"], util
    # The text never prints a share's noise over 100 %.
    rc, text, err = run_gilty("compare", workers["json"], again)
    assert rc == 0, err
    noise = [float(m) for m in re.findall(r"(\d+\.\d) %\s+(?:<-|$)", text, re.M)]
    assert all(n <= 100.0 for n in noise), text
    print(text)


def test_html_of_a_recording_saved_without_stack_slots_says_so(browser, one_thread, tmp_path):
    doc = json.loads(one_thread["json"].read_text())
    for p in doc["recording"]["processes"]:
        del p["stack_slots"]  # as an older gilty saved it
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    page = tmp_path / "old.html"
    rc, _out, err = run_gilty("report", old, "-o", page)
    assert rc == 0, err
    browser.open(page)
    assert browser.js("document.body.dataset.ready") == "1" and browser.errors() == []
    assert "keeps no stacks over time" in browser.js("document.getElementById('range-hint').textContent")
    whole = browser.js(TOTAL_JS)
    drag(browser, 0.72, 0.97)
    assert browser.js(TOTAL_JS) == whole and {"phase_a", "phase_b"} <= functions(browser)
    assert browser.errors() == []
