"""The HTML report: one offline file, its data escaped, downsampled timelines."""

import json
import re

from gilty.report.recording import html as html_report
from gilty.sampling.session import Recording
from recordings import HOSTILE, one_process, two_processes, worker_session
from test_json_report import exact_session


def embedded_data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="gilty-data">(.*?)</script>', page, re.S)
    assert m, "no data element"
    return json.loads(m.group(1))


def test_page_is_self_contained():
    page = html_report.render(two_processes())
    # No external resource of any kind: the page must work offline.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert page.count("<script") == 2  # the data and the inlined JS
    assert "<link" not in page


def test_hostile_names_cannot_end_the_data_element():
    page = html_report.render(Recording.of(worker_session()))
    assert HOSTILE not in page
    assert "<img" not in page
    data = embedded_data(page)
    assert [HOSTILE, "evil&<file>.py", 1] in data["frames"]  # intact after JSON parsing


def test_script_json_escapes_markup_characters():
    text = html_report.script_json({"a": "</script><!-- & \u2028"})
    assert not set("<>&") & set(text)
    assert json.loads(text) == {"a": "</script><!-- & \u2028"}


def test_data_holds_processes_threads_stacks_and_blame():
    data = embedded_data(html_report.render(two_processes()))
    assert [p["pid"] for p in data["processes"]] == [4242, 5151]
    first = data["processes"][0]
    assert {t["name"] for t in first["threads"]} == {"MainThread", "metrics", "io-1", "io-2"}
    assert sum(n for _tid, _state, _path, n in first["stacks"]) == 1600
    io1 = next(t for t in first["threads"] if t["name"] == "io-1")
    assert io1["blame"][0]["holder"] == "metrics" and io1["blame"][0]["fraction"] == 1.0
    assert io1["convoy"]["is_convoy"] is True
    assert data["memory"] is None


def test_exact_histograms_are_included():
    data = embedded_data(html_report.render(Recording.of(exact_session())))
    metrics = next(t for t in data["processes"][0]["threads"] if t["name"] == "metrics")
    assert metrics["exact"]["hold"]["count"] == 300 and metrics["exact"]["hold"]["hist"]
    assert data["processes"][0]["exact_gc"] == [[0.5, 0.01, 2]]


def test_bands_follow_runs_and_are_bounded():
    session = one_process().sessions[0]
    exact = html_report.bands(session, 2, session.duration_s)
    assert exact[0] == [0.0, 0.08, 0] and exact[1] == [0.08, 0.09, 2]
    html_report.MAX_BANDS, saved = 20, html_report.MAX_BANDS
    try:
        few = html_report.bands(session, 2, session.duration_s)
    finally:
        html_report.MAX_BANDS = saved
    assert len(few) <= 20
    # metrics holds the GIL 8 passes in 9: every downsampled slot shows holding_gil.
    assert {state for _a, _b, state in few} == {0}
    assert few[0][0] == 0.0 and abs(few[-1][1] - 4.0) < 1e-6
