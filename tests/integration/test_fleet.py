"""The fleet setup of docs/fleet.md on real processes: `gilty serve -s` on a 2-worker gunicorn whose
app churns thread pools and one-off threads and whose workers are replaced (--max-requests) keeps
its series bounded, labelled by role and short process name; the Grafana dashboard shipped in
deploy/grafana asks Prometheus only for metrics and labels that sidecar really exports, and its
profile panel only for labels gilty's pprof output really carries.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import REPO, TARGETS, free_port, gilty_command, gilty_env, run_gilty, running_target
from test_metrics_export import PROMETHEUS, _query, _start_prometheus

DASHBOARD = REPO / "deploy" / "grafana" / "gilty-dashboard.json"
# Labels the Prometheus server adds to every scraped series (its target labels).
TARGET_LABELS = {"instance", "job"}
REQUESTS = 320
START_TIMEOUT_S = 60.0
_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def gunicorn() -> str:
    found = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or shutil.which("gunicorn")
    if found is None:
        pytest.skip("gunicorn not installed (requirements-dev.txt)")
    return found


def parse(text: str) -> list:
    """[(metric, {label: value}, value)] of every sample line."""
    out = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = _SAMPLE.match(line)
            assert m, line
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def scrape(port: int) -> list:
    return parse(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode())


def wait_until(check, what: str):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"{what} within {START_TIMEOUT_S:g} s")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A churning, respawning gunicorn under load and its sidecar, scraped by a real Prometheus when
    one is installed; yields the scrapes taken under load and Prometheus's API port (or None)."""
    app_port, metrics_port = free_port(), free_port()
    prom = prom_port = None
    server = subprocess.Popen(
        [
            gunicorn(),
            "-w",
            "2",
            "-k",
            "gthread",
            "--threads",
            "4",
            "--max-requests",
            "80",
            "-b",
            f"127.0.0.1:{app_port}",
            "--chdir",
            str(TARGETS),
            "fleet_app:app",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(REPO),
    )
    sidecar = None
    try:
        wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=5).read(), "gunicorn did not answer")
        sidecar = subprocess.Popen(
            [*gilty_command(), "serve", "-s", "--pid", str(server.pid), "--port", str(metrics_port), "--rate", "50"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=gilty_env(),
        )
        wait_until(
            lambda: sum(1 for m, _l, _v in scrape(metrics_port) if m == "gilty_process_up") >= 3,
            "the sidecar did not list 3 processes",
        )
        if PROMETHEUS is not None:
            prom, prom_port = _start_prometheus(tmp_path_factory.mktemp("prometheus"), metrics_port, "gilty")

        def one(_):
            # A gthread worker leaving after --max-requests drops the connections it had queued.
            for attempt in range(5):
                try:
                    return urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=30).read()
                except OSError:
                    if attempt == 4:
                        raise
                    time.sleep(0.1)

        scrapes = []
        with ThreadPoolExecutor(8) as clients:
            for start in range(0, REQUESTS, 40):
                list(clients.map(one, range(start, start + 40)))
                scrapes.append(scrape(metrics_port))
        yield {"server": server.pid, "scrapes": scrapes, "prometheus": prom_port}
    finally:
        for proc in (prom, sidecar, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    assert "Traceback" not in sidecar.stderr.read()


def test_series_stay_bounded_while_pools_churn_and_workers_respawn(fleet):
    scrapes = fleet["scrapes"]
    last = scrapes[-1]
    replaced = int(next(v for m, _l, v in last if m == "gilty_attaches_total")) - 3
    assert replaced >= 2, f"only {replaced} workers replaced: --max-requests did not respawn them"
    names_seen: dict = {}  # pid -> thread labels over all scrapes
    for samples in scrapes:
        up = [l for m, l, _v in samples if m == "gilty_process_up"]
        roles = sorted(l["role"] for l in up)
        assert roles.count("master") == 1 and roles.count("worker") == len(up) - 1, roles
        assert {l["process"] for l in up} == {"gunicorn"}, up
        master = next(l for l in up if l["role"] == "master")
        assert master["pid"] == str(fleet["server"])
        per_pid: dict = {}
        for m, labels, _v in samples:
            assert "tid" not in labels and "cmdline" not in labels, (m, labels)
            if m == "gilty_gil_hold_seconds_total":
                per_pid.setdefault(labels["pid"], set()).add(labels["thread"])
                names_seen.setdefault(labels["pid"], set()).add(labels["thread"])
        # A worker: MainThread, gunicorn's pool, the app's pool, the one-off threads, perhaps a thread
        # seen before Python named it; the master: MainThread and its arbiter's helpers.
        assert all(len(threads) <= 6 for threads in per_pid.values()), per_pid
        assert len(samples) <= 60 * len(up), (len(samples), len(up))
    # Thread ids and numbered names churned all along (a new "Thread-N (_one_off)" every request):
    # within a process the names exported did not, and a numbered pool is one series.
    # (a pool's first two names are series of their own until its third shows up: 2 + 1 per pool)
    assert all(len(threads) <= 10 for threads in names_seen.values()), names_seen
    assert any("ThreadPoolExecutor-#_#" in threads for threads in names_seen.values()), names_seen


def test_uvicorn_spawned_workers_are_workers_and_its_helper_is_not():
    """uvicorn --workers starts its workers with multiprocessing's spawn ("python -c from
    multiprocessing.spawn import spawn_main; ..." with a different pipe number each) beside a
    resource tracker: neither their command lines nor a twin say "worker"; their name does."""
    uvicorn = shutil.which("uvicorn", path=str(Path(sys.executable).parent)) or shutil.which("uvicorn")
    if uvicorn is None:
        pytest.skip("uvicorn not installed (requirements-dev.txt)")
    app_port, metrics_port = free_port(), free_port()
    server = subprocess.Popen(
        [
            uvicorn,
            "--workers",
            "2",
            "--host",
            "127.0.0.1",
            "--port",
            str(app_port),
            "--app-dir",
            str(TARGETS / "server_app"),
            "serverapp:api",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(REPO),
    )
    sidecar = None
    try:
        wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=5).getcode(), "uvicorn did not answer")
        sidecar = subprocess.Popen(
            [*gilty_command(), "serve", "-s", "--pid", str(server.pid), "--port", str(metrics_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=gilty_env(),
        )

        def all_four():
            up = [labels for m, labels, _v in scrape(metrics_port) if m == "gilty_process_up"]
            return up if len(up) >= 4 else None

        up = wait_until(all_four, "the sidecar did not list the master, 2 workers and the resource tracker")
        by_role = sorted((l["role"], l["process"]) for l in up)
        assert by_role == [("child", "resource_tracker"), ("master", "uvicorn"), ("worker", "uvicorn"), ("worker", "uvicorn")], up
        assert next(l for l in up if l["role"] == "master")["pid"] == str(server.pid)
    finally:
        for proc in (sidecar, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


# -- the dashboard -----------------------------------------------------------------------------

_METRIC = re.compile(r"\b(gilty_\w+)")
_MATCHER = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _panels(dashboard: dict) -> list:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # rows
    return out


def _promql(dashboard: dict) -> list:
    """(where, expression, legend) of every Prometheus query: panel targets and query variables."""
    out = []
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            if "expr" in target:
                out.append((panel["title"], target["expr"], target.get("legendFormat", "")))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            out.append((f"variable {var['name']}", query, ""))
    return out


def _labels_used(expr: str, legend: str) -> set:
    used = set(_MATCHER.findall(expr)) | set(_LEGEND.findall(legend))
    for group in _GROUPING.findall(expr):
        used |= {g.strip() for g in group.split(",") if g.strip()}
    m = re.search(r"label_values\((?:.*,)?\s*(\w+)\s*\)$", expr.strip())
    if m:
        used.add(m.group(1))
    return used


def test_dashboard_queries_ask_only_for_what_the_sidecar_exports(fleet):
    exported: dict = {}
    for samples in fleet["scrapes"]:
        for metric, labels, _v in samples:
            exported.setdefault(metric, set()).update(labels)
    dashboard = json.loads(DASHBOARD.read_text())
    queries = _promql(dashboard)
    assert len(queries) >= 10, queries
    panels_using = set()
    for where, expr, legend in queries:
        metrics = set(_METRIC.findall(expr))
        assert metrics, f"{where}: no gilty metric in {expr}"
        unknown = metrics - exported.keys()
        assert not unknown, f"{where}: {sorted(unknown)} not exported by gilty serve (it exports {sorted(exported)})"
        available = set().union(*(exported[m] for m in metrics)) | TARGET_LABELS
        missing = _labels_used(expr, legend) - available
        assert not missing, f"{where}: labels {sorted(missing)} are on none of {sorted(metrics)} ({expr})"
        panels_using |= metrics
    # The panels the fleet page promises.
    assert {
        "gilty_process_gil_held_seconds_total",
        "gilty_gil_wait_seconds_total",
        "gilty_process_gc_seconds_total",
        "gilty_process_private_bytes",
        "gilty_process_shared_bytes",
    } <= panels_using


def _runnable(expr: str) -> str:
    """A dashboard expression as Prometheus can run it: Grafana's variables at "all", its interval
    at 5 s, and a ``label_values(selector, label)`` variable as the series query it stands for."""
    expr = expr.replace("$__rate_interval", "5s")
    expr = re.sub(r"\$\w+", ".*", expr)
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\s*\)", expr.strip())
    return f"count by ({m.group(2)}) ({m.group(1)})" if m else expr


@pytest.mark.skipif(PROMETHEUS is None, reason="Prometheus server not installed (Debian package prometheus; make system-deps)")
def test_dashboard_queries_run_on_a_real_prometheus(fleet):
    port = fleet["prometheus"]
    # Enough scrapes (twice a second) for a 5 s rate.
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if _query(port, "count_over_time(up[5s]) >= 8"):
                break
        except OSError:
            pass
        time.sleep(0.5)
    else:
        pytest.fail("Prometheus did not scrape the sidecar 8 times")
    for where, expr, _legend in _promql(json.loads(DASHBOARD.read_text())):
        result = _query(port, _runnable(expr))  # asserts Prometheus accepted it
        assert result, f"{where}: no series for {_runnable(expr)}"
        for row in result:
            assert "role" not in row["metric"] or row["metric"]["role"] in ("master", "worker"), (where, row)


def _pprof_labels(data: bytes) -> dict:
    """{label key: set of string values} of a gzipped pprof Profile, by a minimal protobuf walk."""

    def varint(buf: bytes, i: int) -> tuple:
        shift = value = 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value, i

    def fields(buf: bytes):
        i = 0
        while i < len(buf):
            key, i = varint(buf, i)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value, i = varint(buf, i)
            elif wire == 2:
                size, i = varint(buf, i)
                value, i = buf[i : i + size], i + size
            elif wire == 1:
                value, i = buf[i : i + 8], i + 8
            elif wire == 5:
                value, i = buf[i : i + 4], i + 4
            else:
                raise AssertionError(f"wire type {wire}")
            yield number, value

    profile = gzip.decompress(data)
    strings = [v.decode() for n, v in fields(profile) if n == 6]  # Profile.string_table
    labels: dict = {}
    for n, sample in fields(profile):
        if n == 2:  # Profile.sample
            for m, label in fields(sample):
                if m == 3:  # Sample.label: key, str, num
                    parts = dict(fields(label))
                    labels.setdefault(strings[parts[1]], set()).add(strings[parts.get(2, 0)])
    return labels


def test_profile_panel_selects_labels_gilty_pprof_carries(tmp_path):
    dashboard = json.loads(DASHBOARD.read_text())
    selectors = [t["labelSelector"] for p in _panels(dashboard) for t in p.get("targets", []) if "labelSelector" in t]
    assert selectors, "no profile panel"
    with running_target(sys.executable, "spinners.py") as target:
        rc, _out, err = run_gilty("record", "--pid", target.pid, "--duration", 1, "--rate", 100, "-o", tmp_path / "p.pb.gz")
    assert rc == 0, err
    labels = _pprof_labels((tmp_path / "p.pb.gz").read_bytes())
    for selector in selectors:
        wanted = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', selector))
        assert wanted, selector
        for key, value in wanted.items():
            assert key in labels, f"{selector}: gilty's pprof has no label {key!r} (it has {sorted(labels)})"
            # Two spinners take turns with the GIL: the waiting state is in the profile.
            assert value in labels[key], f"{selector}: no sample has {key}={value!r} ({sorted(labels[key])})"
