"""The answer at a glance (issue 16): a real gunicorn server (a master and two sync workers serving
`busy_handler`, tests/targets/server_app), recorded with `record -s` under load, then each output
checked where a user reads it: the text report, the HTML page and the SVG in headless Chromium
(screenshots kept in the test's tmp dir), speedscope against its file format, the Chrome trace
against the Trace Event Format with stack slices per thread.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, free_port, run_gilty

pytestmark = pytest.mark.alone

APP_DIR = REPO / "tests" / "targets" / "server_app"
WORKERS = 2
RECORD_S = 3


def _children(pid: int) -> list:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return sorted(int(k) for k in f.read().split())
    except OSError:
        return []


def _get(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """{format: path} of one recording of the server, and the master's pid."""
    pytest.importorskip("gunicorn", reason="gunicorn not installed (requirements-dev.txt)")
    out = tmp_path_factory.mktemp("glance")
    port = free_port()
    log = open(out / "gunicorn.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", str(WORKERS), "-b", f"127.0.0.1:{port}", "--timeout", "60", "serverapp:wsgi"],
        cwd=str(APP_DIR),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 60
        while not (len(_children(server.pid)) == WORKERS and _get(port)):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"gunicorn did not start: {(out / 'gunicorn.log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)

        def load():
            while not stop.is_set():
                _get(port)

        loaders = [threading.Thread(target=load, daemon=True) for _ in range(3)]
        for t in loaders:
            t.start()
        rec = out / "rec.json"
        rc, _out, err = run_gilty("record", "--pid", server.pid, "-s", "--duration", RECORD_S, "-o", rec)
        assert rc == 0, err
    finally:
        stop.set()
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait()
        log.close()
    paths = {"json": rec, "master": server.pid}
    for fmt, name in (
        ("text", "rec.txt"),
        ("html", "rec.html"),
        ("svg", "rec.svg"),
        ("speedscope", "rec.speedscope.json"),
        ("chrome", "rec.trace.json"),
        ("collapsed", "rec.collapsed"),
    ):
        rc, _out, err = run_gilty("report", rec, "-o", out / name)
        assert rc == 0, err
        paths[fmt] = out / name
    return paths


# -- text ------------------------------------------------------------------------------------


def test_text_report_first_screen_names_roles_busiest_thread_and_functions(outputs):
    lines = outputs["text"].read_text().splitlines()
    assert max(len(line) for line in lines) <= 120
    assert lines[1].startswith("Busiest: pid ") and "(worker)" in lines[1], lines[:3]
    heading = next(i for i, line in enumerate(lines) if line.lstrip().startswith("PID ROLE"))
    rows = lines[heading + 1 : heading + 4]
    roles = {int(r.split()[0]): r.split()[1] for r in rows}
    assert roles[outputs["master"]] == "master" and sorted(roles.values()) == ["master", "worker", "worker"], rows
    top = next(i for i, line in enumerate(lines) if line.startswith("Top functions"))
    assert top < 24, "the top functions are not on the first screen"
    assert "busy_handler (serverapp.py:" in lines[top + 2], lines[top : top + 4]
    # A worker's main thread is named by what it runs, not by the wait it sleeps in between requests.
    workers_main = [line for line in lines if line.startswith("  MainThread ") and "busy_handler" in line]
    assert len(workers_main) == WORKERS, "\n".join(lines)


# -- Chromium --------------------------------------------------------------------------------


def screenshot(browser, path: Path, bottom: bool = False) -> Path:
    """A PNG of the page as shown, kept beside the outputs (the test's tmp dir) for a person to look at."""
    if bottom:  # an SVG flame graph grows upwards: its base is at the bottom
        browser.js("window.scrollTo(0, document.documentElement.scrollHeight || document.body.scrollHeight)")
    data = browser.call("Page.captureScreenshot", format="png")["data"]
    path.write_bytes(base64.b64decode(data))
    print(f"screenshot: {path} ({path.stat().st_size} bytes)")
    return path


SVG_FRAMES_JS = """Array.from(document.querySelectorAll('g')).filter(g => g.querySelector('title') && g.querySelector('rect'))
  .map(g => [g.querySelector('title').textContent, (g.querySelector('text') || {}).textContent || '',
             g.querySelector('rect').getAttribute('fill')])"""


def test_svg_labels_keep_the_function_name_idle_off_workers_merged(browser, outputs):
    browser.open(outputs["svg"])
    time.sleep(0.5)  # inferno's script lays out the labels on load
    assert browser.errors() == []
    frames = browser.js(SVG_FRAMES_JS)
    shot = screenshot(browser, outputs["svg"].with_suffix(".svg.png"), bottom=True)
    assert shot.stat().st_size > 10_000
    titles = [t for t, _text, _fill in frames]
    # Idle is left out: no state frame "idle", so the master (idle nearly all the time) is at most a sliver.
    assert not any(t.startswith("idle (") for t in titles)
    master = [t for t in titles if t.startswith(f"pid {outputs['master']} ")]
    assert all(float(t.rsplit(", ", 1)[1].rstrip("%)")) < 5 for t in master), master
    # The two identical workers are one process, their threads merged.
    assert sum(t.startswith(f"{WORKERS} workers of pid {outputs['master']}") for t in titles) == 1, titles[:5]
    python = [(t, text, fill) for t, text, fill in frames if " (/" in t]
    assert python, titles[:20]
    # Frames too narrow for a letter show nothing or "..".
    shown = [(t, text) for t, text, _fill in python if text.strip() not in ("", "..")]
    assert shown
    for title, text in shown:
        function = title.split(" (", 1)[0]
        # Cut from the right: what is shown is the start of `function (file.py:line)`.
        assert not text.startswith(".."), (title, text)
        visible = (text[:-2] if text.endswith("..") else text).rstrip()
        assert function.startswith(visible) or visible.startswith(function + " ("), (title, text)
        if not text.endswith(".."):
            assert text.endswith(")") and "/" not in text, (title, text)
    # The tooltip keeps the whole path; the label the base name.
    handler = [(t, text) for t, text in shown if t.startswith("busy_handler (")]
    assert handler and "/tests/targets/server_app/serverapp.py:" in handler[0][0]
    assert any(text.startswith("busy_handler (serverapp.py:") for _t, text in handler), handler
    # Coloured by state: a frame mostly holding the GIL is red-orange, one idle would be grey; on a
    # busy host the handler may be mostly runnable without a CPU, which is green.
    fill = next(f for t, _x, f in python if t.startswith("busy_handler ("))
    r, g, b = (int(x) for x in fill[4:-1].split(","))
    assert (r > g and r > b) or (g > r and g > b), fill


HTML_FRAMES_JS = "Array.from(document.querySelectorAll('#flamegraph .frame')).map(e => [e.textContent, e.title, e.dataset.kind])"


def test_html_first_screen_roles_idle_off_search_and_self_time(browser, outputs):
    browser.open(outputs["html"])
    assert browser.js("document.body.dataset.ready") == "1"
    assert browser.errors() == []
    screenshot(browser, outputs["html"].with_suffix(".html.png"))
    rows = browser.js("Array.from(document.querySelectorAll('#processes tbody tr')).map(r => [r.dataset.pid, r.dataset.role])")
    assert sorted(role for _pid, role in rows) == ["master", "worker", "worker"]
    assert rows[-1] == [str(outputs["master"]), "master"], "the idle master is listed first"
    assert browser.js("document.getElementById('headline').textContent").startswith("Busiest: pid ")
    # Idle is off: its checkbox unchecked, no idle frame drawn.
    assert browser.js("document.querySelector('#filter-states input[data-state=\"idle\"]').checked") is False
    frames = browser.js(HTML_FRAMES_JS)
    assert not any(text == "idle" for text, _t, _k in frames)
    for text, title, kind in frames:
        if kind == "frame":
            assert text.startswith(title.split(" (", 1)[0] + " ("), (text, title)
    # "No GIL contention" (the master) is not drawn as a problem.
    severities = browser.js("Array.from(document.querySelectorAll('.verdict')).map(v => [v.dataset.severity, v.textContent])")
    assert all(s != "bad" for s, text in severities if "No GIL contention" in text), severities
    # Search: frames of the function are outlined and the share of samples through it is given.
    browser.js(
        "(() => { const s = document.getElementById('flame-search'); s.value = 'busy_handler';"
        " s.dispatchEvent(new Event('input')); })()"
    )
    result = browser.js("document.getElementById('search-result').textContent")
    assert int(result.split()[0]) > 0 and "samples" in result, result
    matches = browser.js("Array.from(document.querySelectorAll('#flamegraph .frame.match')).map(e => e.textContent)")
    assert matches and all(m.startswith("busy_handler") for m in matches)
    screenshot(browser, outputs["html"].with_suffix(".search.png"))
    first = browser.js("document.querySelector('#self-time-table tbody tr td').textContent")
    assert first.startswith("busy_handler ("), first
    # The process filter offers the two workers as one choice; choosing it draws only them.
    options = browser.js("Array.from(document.querySelectorAll('#filter-process option')).map(o => [o.value, o.textContent])")
    workers = [v for v, text in options if text.startswith(f"{WORKERS} workers of pid {outputs['master']}")]
    assert len(workers) == 1 and len(workers[0].split(",")) == WORKERS, options
    total = browser.js("document.querySelector('#flamegraph .frame[data-depth=\"0\"]').title")
    browser.js(
        f"(() => {{ const s = document.getElementById('filter-process'); s.value = '{workers[0]}';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    assert browser.errors() == []
    only = browser.js("document.querySelector('#flamegraph .frame[data-depth=\"0\"]').title")
    samples = lambda title: int(title.split("\n")[1].split()[0])  # noqa: E731
    assert 0 < samples(only) <= samples(total), (only, total)
    assert any(t.startswith("busy_handler (") for t, _title, _k in browser.js(HTML_FRAMES_JS))


# -- speedscope ------------------------------------------------------------------------------

# The required parts of speedscope's file format (its file-format-schema.json): a file with shared
# frames and sampled profiles whose samples index those frames.
SPEEDSCOPE_SCHEMA = {
    "type": "object",
    "required": ["$schema", "shared", "profiles"],
    "properties": {
        "$schema": {"const": "https://www.speedscope.app/file-format-schema.json"},
        "shared": {
            "type": "object",
            "required": ["frames"],
            "properties": {
                "frames": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "file": {"type": "string"}, "line": {"type": "number"}},
                    },
                }
            },
        },
        "activeProfileIndex": {"type": "number"},
        "profiles": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["type", "name", "unit", "startValue", "endValue", "samples", "weights"],
                "properties": {
                    "type": {"const": "sampled"},
                    "name": {"type": "string"},
                    "unit": {"enum": ["none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"]},
                    "startValue": {"type": "number"},
                    "endValue": {"type": "number"},
                    "samples": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
                    "weights": {"type": "array", "items": {"type": "number"}},
                },
            },
        },
    },
}


def test_speedscope_valid_opens_on_the_busiest_thread_without_idle(outputs):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed (requirements-dev.txt)")
    doc = json.loads(outputs["speedscope"].read_text())
    jsonschema.validate(doc, SPEEDSCOPE_SCHEMA)
    frames = doc["shared"]["frames"]
    for p in doc["profiles"]:
        assert len(p["samples"]) == len(p["weights"])
        assert all(0 <= i < len(frames) for s in p["samples"] for i in s)
        assert all(frames[s[0]]["name"] != "idle" for s in p["samples"])

    def busy(p):
        return sum(w for s, w in zip(p["samples"], p["weights"]) if frames[s[0]]["name"] not in ("idle", "unknown"))

    # Profiles come busiest first, and the file opens on the first.
    values = [busy(p) for p in doc["profiles"]]
    assert values == sorted(values, reverse=True) and doc["activeProfileIndex"] == 0
    active = doc["profiles"][0]
    assert active["name"].startswith(f"{WORKERS} workers of pid {outputs['master']}"), active["name"]
    assert any(frames[s[-1]]["name"] == "busy_handler" for s in active["samples"])


# -- Chrome trace ----------------------------------------------------------------------------

PHASES = {"B", "E", "X", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D"}


def test_trace_is_trace_event_format_with_stack_slices_per_thread(outputs):
    doc = json.loads(outputs["chrome"].read_text())
    events = doc["traceEvents"]
    for e in events:
        assert e["ph"] in PHASES and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_labels", "thread_name", "thread_sort_index")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    stacks = [e for e in events if e["ph"] == "X" and e.get("cat") == "stack"]
    by_track: dict = {}
    for e in stacks:
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    assert by_track and all(names[track].endswith(" stack") for track in by_track)
    # Slices on a track nest (a frame lies inside the frame under it), as a flame chart needs.
    for track, slices in by_track.items():
        open_: list = []
        for e in slices:
            while open_ and open_[-1]["ts"] + open_[-1]["dur"] <= e["ts"] + 0.1:
                open_.pop()
            if open_:
                assert e["ts"] + e["dur"] <= open_[-1]["ts"] + open_[-1]["dur"] + 0.1, (names[track], open_[-1], e)
            open_.append(e)
    handler_tracks = {names[(e["pid"], e["tid"])] for e in stacks if e["name"].startswith("busy_handler (serverapp.py:")}
    assert any(t.startswith("MainThread (tid ") for t in handler_tracks), handler_tracks
    # No event repeats absolute paths: names carry base names, the paths are listed once.
    # (A base name shared by two packages keeps its package, `fastapi/applications.py`: never a whole path.)
    assert not any("(/" in e["name"] for e in stacks), [e["name"] for e in stacks if "(/" in e["name"]][:5]
    assert any(f.endswith("/tests/targets/server_app/serverapp.py") for f in doc["otherData"]["files"])
    size_mb = outputs["chrome"].stat().st_size / 1e6
    print(f"trace: {size_mb:.2f} MB for {RECORD_S} s, {size_mb * 60 / RECORD_S:.1f} MB per minute")


def test_compare_differential_page_draws_in_chromium(browser, outputs):
    page = outputs["json"].with_name("diff.html")
    rc, _out, err = run_gilty("compare", outputs["json"], outputs["json"], "-o", page)
    assert rc == 0, err
    browser.open(page)
    time.sleep(0.5)
    assert browser.errors() == []
    # The flame graph is the SVG in the page: its own script ran and laid out the labels.
    frames = browser.js("Array.from(document.querySelectorAll('#diff-flamegraph g > title')).map(t => t.textContent)")
    assert any(t.startswith("busy_handler (serverapp.py) (") for t in frames), frames[:5]
    labels = browser.js("Array.from(document.querySelectorAll('#diff-flamegraph g > text')).map(t => t.textContent)")
    assert any(t.startswith("busy_handler (serverapp.py") for t in labels), labels[:20]
    assert browser.js("document.querySelectorAll('#compare-rows tbody tr').length") > 0
    screenshot(browser, page.with_suffix(".html.png"))


# -- progress on long work -------------------------------------------------------------------


def test_record_of_several_processes_shows_progress_on_a_terminal_only(tmp_path):
    import pty

    from conftest import gilty_command, gilty_env

    target = [sys.executable, str(REPO / "tests" / "targets" / "busy_children.py")]
    argv = gilty_command() + ["record", "-s", "--duration", "2.5", "-o", str(tmp_path / "rec.json"), "--", *target]
    # stderr on a terminal: the progress line is drawn and rewritten in place, then cleared.
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, env=gilty_env())
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0, seen.decode(errors="replace")
    text = seen.decode(errors="replace")
    assert "\rgilty: recording 0:00:0" in text and " processes, " in text, text
    # In a pipe: the same command writes no progress line.
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=gilty_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert b"\r" not in done.stderr and b"gilty: recording 0:" not in done.stderr, done.stderr


def test_blame_matrix_groups_a_pool_into_one_row_and_column(browser, tmp_path):
    # A synthetic recording (tests/unit/recordings.py), rendered in a child Python as the unit tests do.
    page = tmp_path / "pool.html"
    code = (
        "import sys; sys.path[:0] = [sys.argv[2]];"
        "from recordings import thread_pool; from gilty import report;"
        "open(sys.argv[1], 'w', encoding='utf-8').write(report.render(thread_pool(), 'html'))"
    )
    subprocess.run([sys.executable, "-c", code, str(page), str(REPO / "tests" / "unit")], check=True, timeout=60)
    browser.open(page)
    assert browser.errors() == []
    rows = browser.js("Array.from(document.querySelectorAll('.blame-matrix tbody tr')).map(r => r.firstChild.textContent)")
    heads = browser.js("Array.from(document.querySelectorAll('.blame-matrix thead th')).map(h => h.textContent)")
    # Eight waiting threads are one row, not eight columns scrolling off the page.
    assert rows == ["ThreadPoolExecutor-#_# ×8"], rows
    assert heads[1:] == ["MainThread"], heads
    cell = browser.js("document.querySelector('.blame-matrix tbody td:nth-child(2)').textContent")
    assert cell.startswith("100.0 %"), cell


def test_no_lines_in_the_html_flame_graph(browser, outputs):
    import re

    page = outputs["json"].with_name("nolines.html")
    rc, _out, err = run_gilty("report", outputs["json"], "--no-lines", "-o", page)
    assert rc == 0, err
    browser.open(page)
    assert browser.errors() == []
    frames = [text for text, _title, kind in browser.js(HTML_FRAMES_JS) if kind == "frame"]
    assert any(f == "busy_handler (serverapp.py)" for f in frames), frames[:20]
    assert not any(re.search(r":\d+\)$", f) for f in frames), frames[:20]
