"""The HTML report in a real browser: headless Chromium driven over the DevTools protocol.

Loads a report of a real recording (plus a synthetic one with a hostile function name), and
checks what a person would see: no script errors, the flame graph and timeline drawn with the
target's threads and functions, a click on a frame zooms into it, hostile names stay text.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, run_gilty, running_target
from formats_support import recording_interpreter

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make system-deps installs it)")
websocket = pytest.importorskip("websocket", reason="websocket-client not installed (requirements-dev.txt)")

HOSTILE = "</script><img src=x onerror=alert(1)>"
LOAD_TIMEOUT_S = 30.0


class Browser:
    """One headless Chromium and one page, spoken to over a DevTools websocket."""

    def __init__(self, profile_dir: Path) -> None:
        args = [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--user-data-dir={profile_dir}",
            "--window-size=1280,1200",
            "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run its sandbox as root
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.ids = itertools.count(1)
        self.events: list = []
        port = self._devtools_port()
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            if pages or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert pages, "Chromium opened no page"
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=LOAD_TIMEOUT_S, suppress_origin=True)
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def _devtools_port(self) -> int:
        # Chromium prints "DevTools listening on ws://127.0.0.1:PORT/..." on stderr once ready.
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        seen = b""
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                break
            seen += line
            m = re.search(rb"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                return int(m.group(1))
        self.close()
        pytest.fail(f"Chromium did not start its DevTools server:\n{seen.decode(errors='replace')[-2000:]}")

    def call(self, method: str, **params):
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                assert "error" not in msg, f"{method}: {msg['error']}"
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str):
        for msg in self.events:
            if msg.get("method") == method:
                return msg
        while True:
            msg = json.loads(self.ws.recv())
            self.events.append(msg)
            if msg.get("method") == method:
                return msg

    def open(self, path: Path) -> None:
        self.events.clear()  # errors() and wait_for() are about this page from here on
        self.call("Page.navigate", url=path.as_uri())
        self.wait_for("Page.loadEventFired")

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def errors(self) -> list:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for msg in self.events:
            method, params = msg.get("method"), msg.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                out.append(details.get("exception", {}).get("description") or details.get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                out.append(params["entry"].get("text", ""))
        return out

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stderr.close()


@pytest.fixture(scope="module")
def real_report(tmp_path_factory):
    interp = recording_interpreter()
    path = tmp_path_factory.mktemp("html") / "spinners.html"
    with running_target(interp, "spinners.py") as proc:
        rc, _out, err = run_gilty("record", "--pid", proc.pid, "--duration", 1.5, "--rate", 200, "-o", path)
    assert rc == 0, err
    return path


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    # Built in a child Python: the synthetic recordings live with the unit tests.
    path = tmp_path_factory.mktemp("html") / "hostile.html"
    code = (
        "import sys; sys.path[:0] = [sys.argv[2]];"
        "from recordings import two_processes; from gilty import report;"
        "open(sys.argv[1], 'w', encoding='utf-8').write(report.render(two_processes(), 'html'))"
    )
    python = REPO / ".venv" / "bin" / "python"
    subprocess.run(
        [str(python) if python.exists() else sys.executable, "-c", code, str(path), str(REPO / "tests" / "unit")],
        check=True,
        timeout=60,
    )
    return path


FRAMES_JS = "Array.from(document.querySelectorAll('#flamegraph .frame')).map(e => e.textContent)"
ROWS_JS = "Array.from(document.querySelectorAll('#timeline .tl-row .tl-label')).map(e => e.textContent)"


def test_real_report_draws_flame_graph_and_timeline(browser, real_report):
    browser.open(real_report)
    assert browser.js("document.body.dataset.ready") == "1", "the report's script did not finish"
    assert browser.errors() == []
    frames = browser.js(FRAMES_JS)
    assert "all" in frames and "holding_gil" in frames and "waiting_gil" in frames
    assert any(f.startswith("spin_forever (") and "spinners.py:" in f for f in frames), frames
    rows = browser.js(ROWS_JS)
    assert any(r.startswith("spinner-1 (tid ") for r in rows) and any(r.startswith("spinner-2 (tid ") for r in rows)
    assert browser.js("document.querySelectorAll('#timeline .tl-band').length") > 2
    assert "spinner-1" in browser.js("document.getElementById('blame').textContent")


def test_click_on_a_frame_zooms_into_it(browser, real_report):
    browser.open(real_report)
    # A real mouse click in the middle of the first spin_forever frame.
    box = browser.js(
        "(() => { const e = Array.from(document.querySelectorAll('#flamegraph .frame'))"
        ".find(e => e.textContent.startsWith('spin_forever (')); const r = e.getBoundingClientRect();"
        "e.scrollIntoView(); const s = e.getBoundingClientRect();"
        "return [s.left + s.width / 2, s.top + s.height / 2, e.textContent, r.width]; })()"
    )
    x, y, name, width_before = box
    browser.click(x, y)
    top = browser.js(
        "(() => { const e = document.querySelector('#flamegraph .frame[data-depth=\"0\"]');"
        "return [e.textContent, e.style.width, e.getBoundingClientRect().width,"
        "document.getElementById('flamegraph').clientWidth]; })()"
    )
    assert top[0] == name and top[1] == "100%"
    assert top[2] > width_before and top[2] >= top[3] - 4
    crumbs = browser.js("Array.from(document.querySelectorAll('#breadcrumb .crumb')).map(e => e.textContent)")
    assert crumbs[0] == "all" and crumbs[-1] == name
    browser.js("document.getElementById('flame-reset').click()")
    assert browser.js("document.querySelector('#flamegraph .frame[data-depth=\"0\"]').textContent") == "all"
    assert browser.errors() == []


def test_state_filter_hides_other_states(browser, real_report):
    browser.open(real_report)
    browser.js("document.querySelector('#filter-states input[data-state=\"waiting_gil\"]').click()")
    frames = browser.js(FRAMES_JS)
    assert "waiting_gil" not in frames and "holding_gil" in frames


def test_hostile_names_are_text(browser, hostile_report):
    browser.open(hostile_report)
    assert browser.errors() == []
    assert browser.js("document.body.dataset.ready") == "1"
    assert browser.js("document.querySelectorAll('img').length") == 0
    assert browser.js("typeof window.alert") == "function"
    frames = browser.js(FRAMES_JS)
    assert any(f.startswith(HOSTILE + " (evil&<file>.py:1)") for f in frames), frames
    # Both processes are offered by the process filter.
    options = browser.js("Array.from(document.querySelectorAll('#filter-process option')).map(o => o.textContent)")
    assert any(o.startswith("pid 4242") for o in options) and any(o.startswith("pid 5151") for o in options)
