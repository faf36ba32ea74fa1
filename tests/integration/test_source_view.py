"""The HTML report's source view (issue 32 item 3, docs/source-view.md) on real targets, pyenv 3.12:
the hottest line of a known hot function and its states, its text as the file has it, kept in the
saved recording so `gilty report rec.json -o x.html` shows it again; files the target's code names
read only as the target could (a root-only file, a FIFO, /dev/zero are not shown and nothing hangs);
and in Chromium, the view drawn and a click on a flame-graph frame bringing its lines into view
(a screenshot kept in the test's tmp dir)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile

import pytest
from conftest import TARGETS, line_of, run_gilty, running_target
from formats_support import recording_interpreter

SCRIPT = "hot_lines.py"
MARKER = "gilty_source_view_secret_5d1e"  # every line of a root-only file a target's code names


def page_data(path) -> dict:
    text = path.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="gilty-data">(.*?)</script>', text, re.S)
    assert m, "no data element"
    return json.loads(m.group(1))


def view_of(data: dict, function: str) -> dict:
    found = [f for f in data["source_view"]["functions"] if f["function"] == function and f["file"].endswith(SCRIPT)]
    assert len(found) == 1, [(f["function"], f["file"]) for f in data["source_view"]["functions"]]
    return found[0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """`record -- python hot_lines.py` to a saved recording, then `gilty report` of it to HTML."""
    interp = recording_interpreter()  # rendering does not depend on the version: pyenv 3.12 only (suite time)
    out = tmp_path_factory.mktemp("source-view")
    rec, page = out / "rec.json", out / "page.html"
    rc, _out, err = run_gilty(
        "record", "--duration", 2, "--rate", 200, "-o", rec, "--", interp.path, str(TARGETS / SCRIPT), timeout=90
    )
    assert rc == 0, err
    rc, _out, err = run_gilty("report", rec, "-o", page)
    assert rc == 0, err
    return {"rec": rec, "page": page, "data": page_data(page), "dir": out}


def test_the_hottest_line_is_the_c_call_and_it_holds_the_gil(recorded):
    states = recorded["data"]["states"]
    sorter = view_of(recorded["data"], "sort_forever")
    call = line_of(SCRIPT, "sort_call")
    assert sorter["hottest"][0] == call, sorter["hottest"]
    row = {r[0]: r for r in sorter["lines"]}[call]
    self_ = dict(zip(states, row[2]))
    # sorted() runs in C with the GIL held: held (or held while waiting for a CPU on a busy host) is
    # most of the line's time; idle never.
    held = self_["holding_gil"] + self_["cpu_wait"]
    assert self_["holding_gil"] > 0 and held >= 0.5 * sum(row[2]), self_
    assert self_["idle"] == 0
    assert row[3] == row[2]  # the innermost frame: its total is its self
    # The spinner, pure Python beside it, waits for the GIL at its loop.
    spinner = view_of(recorded["data"], "spin_forever")
    assert set(spinner["hottest"]) <= {line_of(SCRIPT, "spin_head"), line_of(SCRIPT, "spin_body")}, spinner["hottest"]
    assert spinner["self"][states.index("waiting_gil")] > 0 and spinner["self"][states.index("holding_gil")] > 0


def test_the_lines_are_the_files_text_and_the_saved_recording_keeps_them(recorded):
    lines = (TARGETS / SCRIPT).read_text(encoding="utf-8").splitlines()
    sorter = view_of(recorded["data"], "sort_forever")
    assert sorter["not_shown"] == ""
    shown = {n: text for n, text, _s, _t in sorter["lines"]}
    assert shown[line_of(SCRIPT, "sort_call")] == lines[line_of(SCRIPT, "sort_call") - 1]
    assert all(text == lines[n - 1] for n, text in shown.items() if text is not None)
    # The saved recording keeps the lines the view shows of the file, no more.
    saved = json.loads(recorded["rec"].read_text(encoding="utf-8"))["recording"]["processes"][0]["sources"]
    (name,) = [f for f in saved if f.endswith(SCRIPT)]
    functions = [f for f in recorded["data"]["source_view"]["functions"] if f["file"] == name]
    assert {"sort_forever", "spin_forever"} <= {f["function"] for f in functions}
    assert set(saved[name]["lines"]) == {str(r[0]) for f in functions for r in f["lines"] if r[1] is not None}


@pytest.mark.root
def test_files_the_code_names_are_read_only_as_the_target_could(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (the target drops to nobody; gilty reads as root)")
    interp = recording_interpreter()
    top = tempfile.mkdtemp(prefix="gilty-src-view-")  # not under pytest's 0700 tmp dir: nobody must reach it
    os.chmod(top, 0o755)
    try:
        _read_as_the_target(interp, top, tmp_path)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _read_as_the_target(interp, top: str, tmp_path) -> None:
    secret, fifo = os.path.join(top, "secret.py"), os.path.join(top, "fifo")
    with open(secret, "w") as f:
        f.write("".join(f"{MARKER} = {i}\n" for i in range(10)))
    os.chmod(secret, 0o600)
    os.mkfifo(fifo, 0o666)
    page = tmp_path / "hostile.html"
    with running_target(interp.path, "hostile_sources.py", "--user", "65534:65534", secret, fifo, "/dev/zero") as proc:
        rc, _out, err = run_gilty("record", "--pid", proc.pid, "--duration", 1.5, "--rate", 200, "-o", page, timeout=60)
    assert rc == 0, err
    text = page.read_text(encoding="utf-8")
    assert MARKER not in text
    why = {f["file"]: f["not_shown"] for f in page_data(page)["source_view"]["functions"] if f["function"] == "hot"}
    assert why.get(secret) == "the target's user cannot read it", why
    assert why.get(fifo) == "not a regular file" and why.get("/dev/zero") == "not a regular file", why


# -- in Chromium ---------------------------------------------------------------------------------


def test_chromium_draws_the_view_and_a_frame_leads_to_its_lines(recorded, browser):
    browser.open(recorded["page"])
    assert browser.js("document.body.dataset.ready") == "1" and browser.errors() == []
    assert browser.js("document.getElementById('source-section').hidden") is False
    names = browser.js("Array.from(document.querySelectorAll('#source-view .src-fn')).map(e => e.dataset.function)")
    assert "sort_forever" in names and "spin_forever" in names, names
    call = line_of(SCRIPT, "sort_call")
    # A real click on the sorted() line's frame zooms into it; the link under the flame graph then
    # opens sort_forever's block and scrolls to the line, marked.
    x, y = browser.js(
        "(() => { const e = Array.from(document.querySelectorAll('#flamegraph .frame'))"
        f".find(e => e.textContent === 'sort_forever ({SCRIPT}:{call})'); e.scrollIntoView();"
        "const r = e.getBoundingClientRect(); return [r.left + Math.min(r.width / 2, 40), r.top + r.height / 2]; })()"
    )
    browser.click(x, y)
    link = browser.js("(() => { const a = document.getElementById('flame-source-link'); return a && a.textContent; })()")
    assert link == f"Lines of sort_forever ({SCRIPT}:{call}) ↓", link
    x, y = browser.js(
        "(() => { const a = document.getElementById('flame-source-link'); a.scrollIntoView({block: 'center'});"
        "const r = a.getBoundingClientRect();"
        "return [r.left + 10, r.top + r.height / 2]; })()"
    )
    browser.click(x, y)
    marked = browser.js(
        "(() => { const tr = document.querySelector('#source-view tr.src-marked'); if (!tr) return null;"
        "const r = tr.getBoundingClientRect(); const block = tr.closest('.src-fn');"
        "return [block.dataset.function, Number(tr.dataset.line), r.top >= 0 && r.bottom <= innerHeight,"
        "tr.querySelector('.src-code').textContent]; })()"
    )
    assert marked is not None, "no line marked after following the link"
    function, line, in_view, code = marked
    assert (function, line, in_view) == ("sort_forever", call, True), marked
    assert "sorted(DATA)" in code
    shot = recorded["dir"] / "source-view.png"
    shot.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"]))
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
