"""`gilty serve -s` on gunicorn --max-requests 1 (workers replaced after every request, a master
thread that ends before every fork) for SECONDS (default 600): the series count and the sidecar's
RSS over time, printed as a table for docs/benchmarks.md.

  .venv/bin/python bench/sidecar_soak.py [SECONDS]
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGETS = REPO / "tests" / "targets"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def series(port: int) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return len(
        set(
            re.findall(r'gilty_gil_hold_seconds_total\{pid="(\d+)",role="[^"]*",process="[^"]*",thread="[^"]*",tid="(\d+)"', text)
        )
    )


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 600.0
    app_port, metrics_port = free_port(), free_port()
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or "gunicorn"
    server = subprocess.Popen(
        [
            gunicorn,
            "-w",
            "2",
            "--max-requests",
            "1",
            "-b",
            f"127.0.0.1:{app_port}",
            "--chdir",
            str(TARGETS),
            "-c",
            str(TARGETS / "respawn_conf.py"),
            "respawn_app:app",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(3)
    gilty = [str(REPO / ".venv" / "bin" / "gilty")]
    sidecar = subprocess.Popen(
        [*gilty, "serve", "-s", "--pid", str(server.pid), "--port", str(metrics_port), "--rate", "50", "--per-thread"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(3)
    print("| minute | requests | series | sidecar RSS (MiB) |")
    print("| ---: | ---: | ---: | ---: |")
    start = time.monotonic()
    requests, next_row = 0, 0.0
    try:
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= next_row:
                print(f"| {elapsed / 60:.0f} | {requests} | {series(metrics_port)} | {rss_mib(sidecar.pid):.1f} |", flush=True)
                next_row += 60.0
            if elapsed >= seconds:
                break
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=30).read()
                requests += 1
            except OSError:
                time.sleep(0.1)
    finally:
        sidecar.terminate()
        sidecar.wait()
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
