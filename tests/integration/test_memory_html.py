"""`gilty memory --faults --format html` in headless Chromium: the shared report page with its memory part,
from a real run on a preloaded fork server (tests/targets/fault_server.py, whose two workers copy the
master's pages in `touch_prices` and, in a full collection, `collect_all`).

What a person would see: the page titled as a memory report of the master, the recording's sections
hidden, every pid of the tree in the table with the figures of the run's JSON report (embedded in the
page: the same object ``--format json`` writes) as the text report prints them, the flame graph of the
copying writes with both functions, a click zooming into one; no script errors. A screenshot is kept
in the test's tmp dir. Then a synthetic page with a hostile function name: it stays text.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, one_version
from fault_server_support import fault_server_run

FAULT_ENV = {"FAULT_FLOATS": "300000", "FAULT_LISTS": "100000"}  # ~30 MiB of shared heap: quick to build
HOSTILE = "</script><img src=x onerror=alert(1)>"


def page_data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="gilty-data">(.*?)</script>', page, re.S)
    assert m, "no data element"
    return json.loads(m.group(1))


def mib(n) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"


@pytest.fixture(scope="module")
def memory_page(interp, tmp_path_factory):
    if interp.path is None:
        pytest.skip(interp.skip_reason)
    one_version(interp, "the page draws the memory JSON report, read the same on every version")
    page = tmp_path_factory.mktemp("memory-html") / "memory.html"
    # The last --format wins: the page is written to -o, stdout stays empty.
    extra = ("--faults", "--format", "html", "-o", str(page))
    with fault_server_run(interp.path, extra, FAULT_ENV) as (rc, _report, err, _results, master, workers):
        assert rc == 0 and page.exists(), f"gilty memory exited {rc}:\n{err}"
        yield page, master, workers


@pytest.mark.interpreter
def test_chromium_draws_the_memory_part_with_the_json_figures(memory_page, browser):
    page, master, workers = memory_page
    text = page.read_text(encoding="utf-8")
    data = page_data(text)
    report = data["memory"]["report"]  # what --format json writes for this run (samples cut to the last)
    assert report["kind"] == "memory" and report["master_pid"] == master
    assert f"<title>gilty memory: pid {master}</title>" in text

    browser.open(page)
    assert browser.js("document.body.dataset.ready") == "1" and browser.js("document.body.dataset.memoryReady") == "1"
    assert browser.errors() == []
    assert browser.js("document.getElementById('title').textContent") == f"gilty memory: pid {master}"
    assert browser.js("document.getElementById('headline').textContent") == data["memory"]["headline"]
    # No empty flame graph or timeline of a recording there is none of.
    for section in ("flame-section", "timeline-section", "blame-section", "convoy-section"):
        assert browser.js(f"document.getElementById('{section}').hidden") is True, section
    assert browser.js("document.getElementById('memory-section').hidden") is False

    rows = browser.js(
        "Array.from(document.querySelectorAll('#memory-processes tr[data-pid]')).map(tr => "
        "[Number(tr.dataset.pid), tr.dataset.role, Array.from(tr.querySelectorAll('td[data-col]')).map(td => td.textContent)])"
    )
    assert {pid for pid, _, _ in rows} == {master, *workers}
    by_pid = {p["pid"]: p for p in report["processes"]}
    pre = browser.js("document.getElementById('memory-text').textContent")
    assert pre == data["memory"]["text"]
    for pid, role, cells in rows:
        p = by_pid[pid]
        s = p["samples"][-1]
        tracked = p["cow"]["baseline_shared_bytes"] is not None
        growth = p["cow"]["private_growth_bytes"] / 2**20
        expected = [
            mib(s["rss"]),
            mib(s["pss"]),
            mib(s["uss"]),
            mib(s["shared_clean"] + s["shared_dirty"]),
            f"{growth:+.1f}",
            mib(p["cow"]["during_gc_bytes"]) if tracked else "-",
            mib(p["cow"]["outside_gc_bytes"]) if tracked else "-",
        ]
        assert role == p["role"] and cells[:7] == expected, (pid, cells, expected)
        f = p["since_fork"]
        if f:
            assert cells[7:] == [mib(f[k]) for k in ("shared_with_parent_bytes", "copied_bytes", "new_bytes", "private_bytes")]
        # The text report's row of this process has the same figures.
        text_row = next(line for line in pre.splitlines() if re.match(rf"{role}\s+{pid}\b", line))
        assert text_row.split()[2:9] == expected, (text_row, expected)
    summary = browser.js("Array.from(document.querySelectorAll('#memory-summary .verdict')).map(e => e.textContent)")
    assert summary == report["summary"] + [w["message"] for w in report["warnings"]]

    # --faults: both copying functions in the flame graph, the collection's under its marker; a click zooms.
    frames = browser.js("Array.from(document.querySelectorAll('#memory-flame .frame')).map(e => e.textContent)")
    assert any(f.startswith("touch_prices (fault_server.py:") for f in frames), frames
    assert any(f.startswith("collect_all (fault_server.py:") for f in frames) and "[garbage collection]" in frames
    x, y = browser.js(
        "(() => { const f = Array.from(document.querySelectorAll('#memory-flame .frame'))"
        ".find(e => e.textContent.startsWith('touch_prices')); f.scrollIntoView();"
        "const r = f.getBoundingClientRect(); return [r.left + 5, r.top + r.height / 2]; })()"
    )
    browser.click(x, y)
    crumb = browser.js("document.getElementById('memory-flame-crumb').textContent")
    assert crumb.startswith("all") and crumb.endswith(next(f for f in frames if f.startswith("touch_prices"))), crumb
    browser.js("document.querySelectorAll('#memory-flame-crumb .crumb')[0].click()")  # back to the whole graph
    browser.js("window.scrollTo(0, 0)")
    shot = page.with_suffix(".png")
    shot.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]))
    print(f"screenshot: {shot}")
    assert browser.errors() == []


def test_chromium_keeps_a_hostile_function_name_as_text(browser, tmp_path):
    # A synthetic --faults run (tests/unit's), one of its copying functions named like markup.
    path = tmp_path / "hostile-memory.html"
    code = (
        "import sys; sys.path[:0] = [sys.argv[2]];"
        "from test_memory_report import default_session; from test_memory_faults_report import raw;"
        "from gilty import report;"
        "s = default_session(); r = raw(); r['rows'][3]['frames'] = [(sys.argv[3], '/srv/x.py', 1)];"
        "r['rows'][3]['samples'] = 50; s.faults = r;"
        "open(sys.argv[1], 'w', encoding='utf-8').write(report.render(s, 'html'))"
    )
    python = REPO / ".venv" / "bin" / "python"
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    subprocess.run(
        [str(python) if python.exists() else sys.executable, "-c", code, str(path), str(REPO / "tests" / "unit"), HOSTILE],
        check=True,
        env=env,
        timeout=60,
    )
    assert HOSTILE not in path.read_text(encoding="utf-8")
    browser.open(path)
    assert browser.js("document.body.dataset.memoryReady") == "1" and browser.errors() == []
    frames = browser.js("Array.from(document.querySelectorAll('#memory-flame .frame')).map(e => e.textContent)")
    assert f"{HOSTILE} (x.py:1)" in frames
    assert browser.js("document.querySelectorAll('img').length") == 0
    functions = browser.js("Array.from(document.querySelectorAll('#memory-fault-functions td.name')).map(e => e.textContent)")
    assert f"{HOSTILE} (x.py)" in functions
