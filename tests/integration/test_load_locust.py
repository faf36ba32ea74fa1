"""`gilty load --locustfile` (issue 8, item 7): a real Locust (requirements-dev.txt) runs headless, a
master and two local workers, against a real server that gilty starts and profiles meanwhile. The
report carries Locust's own figures labelled closed loop, its per-second history joined with the
server's GIL utilisation on the wall clock, and the server's profile (the handler under quote()).
Bounded: 6 users for 4 s on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TARGETS, free_port, gilty_command, gilty_env

LOCUST = Path(sys.executable).with_name("locust")
pytestmark = [
    pytest.mark.skipif(
        not LOCUST.exists() and shutil.which("locust") is None, reason="Locust not installed (requirements-dev.txt; make setup)"
    ),
    pytest.mark.alone,
]


@pytest.fixture(scope="module")
def report() -> dict:
    port = free_port()
    done = subprocess.run(
        [
            *gilty_command(),
            "load",
            f"http://127.0.0.1:{port}/",
            "--locustfile",
            str(TARGETS / "locust_tasks.py"),
            "--users",
            "6",
            "--spawn-rate",
            "6",
            "--workers",
            "2",
            "--duration",
            "4",
            "--format",
            "json",
            "--",
            sys.executable,
            str(TARGETS / "http_cpu_server.py"),
            str(port),
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=gilty_env(),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def test_locust_figures_are_labelled_closed_loop(report):
    assert report["kind"] == "load_locust" and report["loop"] == "closed"
    assert report["workers"] == 2 and report["users"] == 6
    agg = report["aggregated"]
    assert agg["count"] > 20 and agg["failures"] == 0, agg
    (only,) = report["requests"]
    assert only["method"] == "GET" and only["name"] == "/"  # the host's trailing slash is not doubled
    assert 0 < agg["p50_s"] <= agg["p99_s"] <= agg["max_s"]
    from gilty.load.result import LocustResult
    from gilty.report.load.locust_text import render as render_locust_text

    assert "CLOSED LOOP" in render_locust_text(LocustResult(report))


def test_per_second_history_is_joined_with_the_server(report):
    seconds = report["seconds"]
    # every request Locust counted is in some second of its history
    assert sum(s["requests"] for s in seconds) == report["aggregated"]["count"]
    loaded = [s for s in seconds if s["users"] > 0]
    assert loaded and all(s["server_gil"] is not None for s in loaded)
    # The handler is Python, so the server holds the GIL; its busiest second holds it at least as much as
    # the whole run does on average (the run's own profile, measured in the same run: a busy machine
    # lowers both alike).
    run_gil = report["profile"]["gil_utilisation"]
    assert run_gil > 0, report["profile"]
    assert max(s["server_gil"] for s in loaded) >= 0.9 * run_gil - 0.02, (run_gil, loaded)


def test_the_server_profile_names_the_handler(report):
    endpoints = report["profile"]["endpoints"]
    top = endpoints[0]
    assert top["function"].rsplit(".", 1)[-1] == "do_GET" and top["top_site"].startswith("quote ("), top


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed (make system-deps installs it)")
def test_html_part_of_a_locust_run(report, tmp_path):
    # The page of this run (without the recording, which the JSON report does not carry), drawn by Chromium.
    import os
    import re

    from gilty.load.result import LocustResult
    from gilty.report.load.locust_html import render as render_locust_html

    page = tmp_path / "locust.html"
    page.write_text(
        render_locust_html(LocustResult({k: v for k, v in report.items() if k not in ("format_version", "kind", "loop")})),
        encoding="utf-8",
    )
    args = [
        "chromium",
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        page.as_uri(),
    ]
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium refuses to run its sandbox as root
    dom = subprocess.run(args, capture_output=True, text=True, timeout=60).stdout
    assert 'id="locust-closed-loop"' in dom
    assert dom.count('class="locust-bar"') == len(report["seconds"])
    assert 'data-series="server_gil"' in dom
    table = re.search(r'<table id="locust-requests">(.*?)</table>', dom, re.S).group(1)
    assert table.count("<tr") == 3 and "GET /" in table  # header, the request, the aggregate
