"""`gilty load … -o run.html`: the shared HTML report with the load part on top (issue 8, item 8),
checked in headless Chromium after its scripts ran (--dump-dom): the latency and throughput curve
with one point per step, the knee marked, a row per step with the server's state bar, the endpoint
table with the handler, and below them the recording's own sections."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import TARGETS, free_port, gilty_command, gilty_env

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple:
    out = tmp_path_factory.mktemp("load-html") / "run.html"
    port = free_port()
    done = subprocess.run(
        [
            *gilty_command(),
            "load",
            f"http://127.0.0.1:{port}/",
            "--ramp",
            "10:250:40",
            "--duration",
            "2",
            "--slo",
            "p99=1s",
            "--warmup",
            "1",
            "-o",
            str(out),
            "--",
            sys.executable,
            str(TARGETS / "http_cpu_server.py"),
            str(port),
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=gilty_env(),
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="gilty-data">(.*?)</script>', text, re.S).group(1))
    return text, data


def test_the_page_carries_the_load_run_and_a_step_recording(page):
    _text, data = page
    load = data["load"]
    # A 1 s objective leaves room for other jobs on the machine: the first steps meet it, a later one not.
    assert load["kind"] == "load" and len(load["steps"]) >= 2, [s["verdict"] for s in load["steps"]]
    assert load["knee"]["rate"] is not None
    # the recording below the load part is the server during the last step
    assert load["recording_step"] == load["steps"][-1]["requested_rate"]
    assert data["processes"] and any(t["name"] for p in data["processes"] for t in p["threads"])
    # The server's hot lines are read at the step's end for the source view (docs/source-view.md).
    server = [f for f in (data["source_view"] or {}).get("functions", []) if f["file"].endswith("http_cpu_server.py")]
    assert server and any(row[1] is not None for f in server for row in f["lines"]), data["source_view"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make system-deps installs it)")
def test_chromium_draws_the_curve_steps_and_endpoints(page, tmp_path):
    text, data = page
    path = tmp_path / "run.html"
    path.write_text(text, encoding="utf-8")
    args = [
        CHROMIUM,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        path.as_uri(),
    ]
    if os.geteuid() == 0:  # Chromium refuses to run its sandbox as root
        args.insert(1, "--no-sandbox")
    dom = subprocess.run(args, capture_output=True, text=True, timeout=60).stdout
    steps = data["load"]["steps"]
    assert 'id="load-section"' in dom
    for series in ("p50", "p99", "throughput"):
        points = re.search(rf'points="([^"]*)"[^>]*data-series="{series}"', dom)
        assert points and len(points.group(1).split()) == len(steps), series
    # The p99 points are drawn after (over) the throughput points and larger, so a p99 point on the
    # same pixel as a throughput point stays visible.
    circles = re.findall(
        r'<circle [^>]*class="series point (\w+)"[^>]*r="([\d.]+)"|<circle [^>]*r="([\d.]+)"[^>]*class="series point (\w+)"', dom
    )
    order = [c[0] or c[3] for c in circles]
    radius = {c[0] or c[3]: float(c[1] or c[2]) for c in circles}
    assert order and max(i for i, c in enumerate(order) if c == "tp") < min(i for i, c in enumerate(order) if c == "p99"), order
    assert radius["p99"] > radius["tp"], radius
    knee = data["load"]["knee"]
    assert ('id="load-knee-line"' in dom) == (knee["rate"] is not None and knee["limit"] != "none reached"), knee
    table = re.search(r'<table id="load-steps">(.*?)</table>', dom, re.S).group(1)
    assert table.count("<tr") == len(steps) + 1
    assert table.count('class="state-bar"') == len(steps)
    endpoints = html.unescape(re.search(r'<table id="load-endpoints">(.*?)</table>', dom, re.S).group(1))
    assert "do_GET (http_cpu_server.py)" in endpoints and "quote (" in endpoints
    # the recording's own sections are still drawn below
    assert 'id="flamegraph"' in dom and 'class="frame"' in dom


def _dom(path, tmp_path) -> str:
    args = [
        CHROMIUM,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        path.as_uri(),
    ]
    if os.geteuid() == 0:  # Chromium refuses to run its sandbox as root
        args.insert(1, "--no-sandbox")
    return subprocess.run(args, capture_output=True, text=True, timeout=60).stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make system-deps installs it)")
def test_a_saved_load_report_has_a_load_header(tmp_path):
    # issue 31, item 11: `gilty report load.json -o x.html` was headed "gilty: 0 processes" with
    # "duration 0.0 ms, samples 0": the empty recording's header, not the load run's.
    port = free_port()
    saved, out = tmp_path / "load.json", tmp_path / "x.html"
    done = subprocess.run(
        [
            *gilty_command(),
            "load",
            f"http://127.0.0.1:{port}/",
            "--ramp",
            "20:60:40",
            "--duration",
            "1",
            "--slo",
            "p99=1s",
            "--warmup",
            "0.2",
            "-o",
            str(saved),
            "--",
            sys.executable,
            str(TARGETS / "http_cpu_server.py"),
            str(port),
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=gilty_env(),
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [*gilty_command(), "report", str(saved), "-o", str(out)], capture_output=True, text=True, timeout=60, env=gilty_env()
    )
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    assert f"<title>gilty load: http://127.0.0.1:{port}/" in page, page[:300]
    dom = _dom(out, tmp_path)
    title = html.unescape(re.search(r'<h1 id="title">(.*?)</h1>', dom, re.S).group(1))
    assert title == f"gilty load: http://127.0.0.1:{port}/", title
    summary = html.unescape(re.sub(r"<[^>]+>", " ", re.search(r'<dl id="summary">(.*?)</dl>', dom, re.S).group(1)))
    summary = " ".join(summary.split())
    assert "samples" not in summary and "duration 0.0" not in summary, summary
    assert "steps 2 (20 to 60 rps, 1 s each)" in summary, summary
    assert "SLO p99 <= 1000 ms" in summary and "knee " in summary, summary
