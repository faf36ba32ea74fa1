"""Prometheus and OpenTelemetry export of the in-process monitor, against real receivers:
Debian's Prometheus server scraping the collector over loopback, and an OTLP/HTTP endpoint run by the
test decoding what the SDK's real OTLP exporter sends. The target has two spinners: each must show
about as much GIL hold as wait."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
from conftest import free_port, start_target
from timing_reference import Pressure, assert_unless_busy, busy

pytestmark = pytest.mark.alone

PROMETHEUS = shutil.which("prometheus")


def _start_prometheus(folder, scraped_port: int, job: str) -> tuple:
    """Debian's Prometheus scraping 127.0.0.1:scraped_port twice a second; (process, its API port)."""
    port = free_port()
    config = folder / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 500ms}\n"
        f"scrape_configs: [{{job_name: {job}, static_configs: [{{targets: ['127.0.0.1:{scraped_port}']}}]}}]\n"
    )
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, port


def _query(port: int, promql: str) -> list:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.skipif(PROMETHEUS is None, reason="Prometheus server not installed (Debian package prometheus; make system-deps)")
def test_prometheus_scrapes_hold_and_wait(tmp_path):
    app_port = free_port()
    pressure = Pressure()
    target = start_target(sys.executable, "metrics_spinners.py", "prometheus", str(app_port))
    prom, prom_port = _start_prometheus(tmp_path, app_port, "gilty")
    try:
        deadline = time.monotonic() + 60
        holds: list = []
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                # Over the last 3 s of whole scrapes, once 4 s of data exist.
                holds = _query(
                    prom_port,
                    'rate(gilty_gil_hold_seconds_total{thread=~"spinner-.*"}[3s]) and on() (time() - min(timestamp(up)) > 0) and on() count_over_time(up[5s]) >= 8',
                )
            except OSError:
                continue
            if len(holds) == 2:
                break
        assert len(holds) == 2, f"Prometheus did not get both spinners: {holds}"
        waits = _query(prom_port, 'rate(gilty_gil_wait_seconds_total{thread=~"spinner-.*"}[3s])')
        states = _query(prom_port, 'rate(gilty_thread_state_seconds_total{thread=~"spinner-.*"}[3s])')
        by_thread: dict = {}
        for kind, rows in (("hold", holds), ("wait", waits)):
            for row in rows:
                assert row["metric"]["pid"] == str(target.pid)
                by_thread.setdefault(row["metric"]["thread"], {})[kind] = float(row["value"][1])
        seen = {(r["metric"]["thread"], r["metric"]["state"]): round(float(r["value"][1]), 3) for r in states}
        for thread, rates in by_thread.items():
            # Each spinner holds about half of the time both spend on the GIL, and waits the other half.
            share = rates["hold"] / (rates["hold"] + rates["wait"])
            assert_unless_busy(0.3 <= share <= 0.7, pressure, f"{thread}: {rates}, states {seen}")
            # hold + wait cover most of every second (the rest: handoffs read as native, and time
            # runnable without a CPU, on a busy machine)
            covered = rates["hold"] + rates["wait"] + seen.get((thread, "cpu_wait"), 0.0)
            why = busy(pressure.share())
            if covered < 0.6 and why:
                pytest.skip(f"the machine was too busy for the spinners to run ({why}): {thread} {rates}, states {seen}")
            assert covered >= 0.6, (thread, rates, seen)
        gc_series = _query(prom_port, "gilty_process_private_bytes")
        assert gc_series and float(gc_series[0]["value"][1]) > 0
    finally:
        prom.terminate()
        prom.wait(timeout=10)
        target.stop()


class _OtlpReceiver(http.server.BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _OtlpReceiver.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_otlp_exporter_sends_gilty_metrics():
    pytest.importorskip("opentelemetry.proto", reason="opentelemetry-proto not installed (requirements-dev.txt)")
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtlpReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/metrics"
    _OtlpReceiver.received = []
    try:
        pressure = Pressure()
        target = start_target(sys.executable, "metrics_spinners.py", "otlp", url, "2.5")
        target.popen.wait(timeout=60)
        assert target.popen.returncode == 0, target.stderr_text()
    finally:
        server.shutdown()
    assert _OtlpReceiver.received, "the OTLP exporter sent nothing"
    last: dict = {}
    names = set()
    for path, body in _OtlpReceiver.received:
        assert path == "/v1/metrics"
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    names.add(metric.name)
                    if metric.name in ("gilty.gil.hold", "gilty.gil.wait"):
                        for dp in metric.sum.data_points:
                            attrs = {a.key: a.value.string_value or a.value.int_value for a in dp.attributes}
                            last[(metric.name, attrs["thread.name"])] = dp.as_double
    assert {"gilty.gil.hold", "gilty.gil.wait", "gilty.thread.state", "gilty.gc.pause", "gilty.process.private"} <= names
    for spinner in ("spinner-0", "spinner-1"):
        hold, wait = last[("gilty.gil.hold", spinner)], last[("gilty.gil.wait", spinner)]
        # cumulative seconds over ~2.5 s of spinning: about half each
        assert_unless_busy(0.6 <= hold / (hold + wait) * 2 <= 1.4, pressure, f"{spinner}: held {hold:.3f} s, waited {wait:.3f} s")
        assert hold + wait >= 1.0


def _gilty_serve(pid: int, port: int) -> subprocess.Popen:
    from conftest import gilty_command, gilty_env

    return subprocess.Popen(
        [*gilty_command(), "serve", "--pid", str(pid), "--port", str(port), "--rate", "50"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=gilty_env(),
    )


@pytest.mark.skipif(PROMETHEUS is None, reason="Prometheus server not installed (Debian package prometheus; make system-deps)")
def test_prometheus_scrapes_the_sidecar_and_it_survives_a_restart(tmp_path):
    serve_port = free_port()
    pressure = Pressure()
    target = start_target(sys.executable, "spinners.py")
    sidecar = _gilty_serve(target.pid, serve_port)
    prom, prom_port = _start_prometheus(tmp_path, serve_port, "gilty-serve")
    restarted = None
    try:
        deadline, holds = time.monotonic() + 60, []
        while time.monotonic() < deadline and len(holds) != 2:
            time.sleep(0.5)
            try:
                holds = _query(
                    prom_port,
                    'rate(gilty_gil_hold_seconds_total{thread=~"spinner-.*"}[3s]) and on() count_over_time(up[5s]) >= 8',
                )
            except OSError:
                continue
        assert len(holds) == 2, holds
        waits = {
            r["metric"]["thread"]: float(r["value"][1])
            for r in _query(prom_port, 'rate(gilty_gil_wait_seconds_total{thread=~"spinner-.*"}[3s])')
        }
        for row in holds:
            hold, wait = float(row["value"][1]), waits[row["metric"]["thread"]]
            assert row["metric"]["pid"] == str(target.pid)
            assert_unless_busy(0.3 <= hold / (hold + wait) <= 0.7 and hold + wait >= 0.6, pressure, f"{row}, waits {waits}")
        # The target restarts with the same command line: the sidecar waits, re-attaches, says so once.
        target.stop()
        restarted = start_target(sys.executable, "spinners.py")
        deadline, up = time.monotonic() + 30, []
        while time.monotonic() < deadline:
            time.sleep(0.5)
            up = _query(prom_port, f'gilty_process_up{{pid="{restarted.pid}"}}')
            if up:
                break
        assert up, "the sidecar did not re-attach to the restarted target"
    finally:
        prom.terminate()
        prom.wait(timeout=10)
        sidecar.send_signal(2)
        _out, err = sidecar.communicate(timeout=15)
        target.stop()
        if restarted is not None:
            restarted.stop()
    assert sidecar.returncode == 0, err
    assert f"re-attached to pid {restarted.pid}" in err and err.count("re-attached") == 1, err
    assert "Traceback" not in err


def test_sidecar_port_in_use_is_one_line():
    from conftest import assert_one_error_line, run_gilty

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        rc, _out, err = run_gilty("serve", "--pid", os.getpid(), "--port", busy.getsockname()[1], timeout=30)
    assert rc == 2
    assert "cannot listen on 127.0.0.1:" in assert_one_error_line(err)


def test_sidecar_clients_that_hang_up_or_send_garbage_get_no_traceback():
    # Scrapers that reset the connection mid-answer (a Prometheus scrape timeout, a killed curl) or
    # send no request at all: the sidecar says nothing or one line, and goes on serving.
    serve_port = free_port()
    target = start_target(sys.executable, "spinners.py")
    sidecar = _gilty_serve(target.pid, serve_port)
    try:
        url = f"http://127.0.0.1:{serve_port}/metrics"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=5).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "the sidecar did not answer"
                time.sleep(0.2)
        for i in range(40):
            with socket.create_connection(("127.0.0.1", serve_port), timeout=5) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" if i % 2 else b"\x16\x03\x01 not http\r\n\r\n")
                # Close with a reset (SO_LINGER 0) before reading the answer.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        assert "gilty_gil_hold_seconds_total" in body
    finally:
        sidecar.send_signal(2)
        _out, err = sidecar.communicate(timeout=15)
        target.stop()
    assert sidecar.returncode == 0, err
    assert "Traceback" not in err, err
