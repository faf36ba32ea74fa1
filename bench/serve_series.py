"""How many series `gilty serve -s` exports for a 4-worker gunicorn (gthread, 4 threads) whose app
churns threads (tests/targets/fleet_app.py) and whose workers are replaced after --max-requests:
the series in the last scrape and the distinct series seen over all scrapes (what a Prometheus
server has to index), printed for docs/benchmarks.md.

  .venv/bin/python bench/serve_series.py [--gilty PATH] [--requests N] [-- EXTRA SERVE ARGS]

A series is one sample line of /metrics (name and label set).
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGETS = REPO / "tests" / "targets"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) ", re.M)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> set:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {m for m in _SAMPLE.findall(text) if not m.startswith("#")}


def wait_for(check, seconds: float = 60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("timed out")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gilty", default=str(REPO / ".venv" / "bin" / "gilty"))
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--max-requests", type=int, default=200)
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or shutil.which("gunicorn")
    app_port, metrics_port = free_port(), free_port()
    server = subprocess.Popen(
        [
            gunicorn,
            "-w",
            "4",
            "-k",
            "gthread",
            "--threads",
            "4",
            "--max-requests",
            str(args.max_requests),
            "-b",
            f"127.0.0.1:{app_port}",
            "--chdir",
            str(TARGETS),
            "fleet_app:app",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sidecar = None
    try:
        wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=5).read())
        sidecar = subprocess.Popen(
            [args.gilty, "serve", "-s", "--pid", str(server.pid), "--port", str(metrics_port), *args.extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: scrape(metrics_port))
        time.sleep(2)
        seen: set = set()
        last: set = set()

        def one(_):
            urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=30).read()

        started = time.monotonic()
        with ThreadPoolExecutor(8) as clients:
            futures = [clients.submit(one, i) for i in range(args.requests)]
            while not all(f.done() for f in futures):
                last = scrape(metrics_port)
                seen |= last
                time.sleep(0.5)
        time.sleep(1.5)
        last = scrape(metrics_port)
        seen |= last
        processes = {m for m in last if m.startswith("gilty_process_up")}
        print(f"{args.requests} requests in {time.monotonic() - started:.0f} s; serve args {args.extra or '(none)'}")
        print(
            f"processes up: {len(processes)}; series in the last scrape: {len(last)}; distinct series over all scrapes: {len(seen)}"
        )
    finally:
        for proc in (sidecar, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
