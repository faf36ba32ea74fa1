"""Distributed load with Locust, not a home-made cluster: a headless Locust master and K local workers
(remote ones join with Locust's own ``--master-host``) run a locustfile while gilty samples the server.

Locust's users are a *closed* loop: each waits for its answer (and its wait_time) before sending the
next request, so a slow server receives fewer requests and the latencies omit the requests that were
never sent (coordinated omission). Its figures are reported as Locust's own, labelled closed loop,
beside gilty's open-loop ones. Locust's per-second history (rolling percentiles and requests/s) is
joined with the server's profile on the wall clock: for each second, the GIL utilisation of the
busiest server process in that second.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Optional

from gilty._errors import CommandError, UsageError
from gilty.sampling.aggregate import PASS_GIL_HELD

# After the run time, how long the master may take to stop its users and write its CSV files.
STOP_GRACE_S = 30.0
WORKER_CONNECT_TIMEOUT_S = 60.0


@dataclass
class LocustOptions:
    locustfile: str
    users: int
    spawn_rate: float
    workers: int
    duration_s: float
    host: Optional[str]


def locust_command() -> list:
    """How to run Locust: the `locust` beside this Python (a venv), else on PATH; one line if neither."""
    beside = os.path.join(os.path.dirname(sys.executable), "locust")
    if os.access(beside, os.X_OK):
        return [beside]
    found = shutil.which("locust")
    if found:
        return [found]
    raise UsageError("--locustfile needs Locust (pip install locust; the project's requirements-dev.txt has it)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None  # "N/A" before the first answer


def _ms_to_s(text: str) -> Optional[float]:
    v = _number(text)
    return None if v is None else v / 1e3


def read_stats(prefix: str) -> dict:
    """Locust's CSV files → {"requests": [...], "aggregated": {...}, "seconds": [...]}, times in seconds."""
    requests, aggregated = [], None
    with open(f"{prefix}_stats.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            row = {
                "method": r["Type"],
                "name": r["Name"],
                "count": int(r["Request Count"]),
                "failures": int(r["Failure Count"]),
                "rps": _number(r["Requests/s"]),
                "p50_s": _ms_to_s(r["50%"]),
                "p90_s": _ms_to_s(r["90%"]),
                "p99_s": _ms_to_s(r["99%"]),
                "max_s": _ms_to_s(r["100%"]),
                "mean_s": _ms_to_s(r["Average Response Time"]),
            }
            if r["Name"] == "Aggregated":
                aggregated = row
            else:
                requests.append(row)
    seconds = []
    with open(f"{prefix}_stats_history.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["Name"] != "Aggregated":
                continue
            seconds.append(
                {
                    "t": int(r["Timestamp"]),
                    "users": int(r["User Count"]),
                    "rps": _number(r["Requests/s"]),
                    "failures_s": _number(r["Failures/s"]),
                    "p50_s": _ms_to_s(r["50%"]),
                    "p95_s": _ms_to_s(r["95%"]),
                    "p99_s": _ms_to_s(r["99%"]),
                    "total": int(r["Total Request Count"]),
                }
            )
    # Requests/s in the history is Locust's rolling figure; the count of the second is exact.
    previous = 0
    for sec in seconds:
        sec["requests"] = max(0, sec["total"] - previous)
        previous = max(previous, sec["total"])
    return {"requests": requests, "aggregated": aggregated, "seconds": seconds}


class LocustRun:
    """A headless master and its local workers; ``run()`` blocks until the master ends."""

    def __init__(self, options: LocustOptions) -> None:
        self.options = options
        self.dir = tempfile.mkdtemp(prefix="gilty-locust-")
        self.procs: list = []
        self.master: Optional[subprocess.Popen] = None

    def _start(self, args: list, name: str) -> subprocess.Popen:
        log = open(os.path.join(self.dir, f"{name}.log"), "wb")
        # Own sessions: a Ctrl-C reaches gilty, which stops the master itself and still reports.
        p = subprocess.Popen(
            [*locust_command(), "-f", self.options.locustfile, *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs.append(p)
        return p

    def log_tail(self, name: str = "master") -> str:
        try:
            with open(os.path.join(self.dir, f"{name}.log"), encoding="utf-8", errors="replace") as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def run(self) -> dict:
        o = self.options
        port = _free_port()
        prefix = os.path.join(self.dir, "stats")
        master_args = [
            "--headless",
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--expect-workers",
            str(o.workers),
            "--expect-workers-max-wait",
            f"{WORKER_CONNECT_TIMEOUT_S:g}",
            "-u",
            str(o.users),
            "-r",
            f"{o.spawn_rate:g}",
            "-t",
            f"{max(1, round(o.duration_s))}s",
            "--csv",
            prefix,
            "--csv-full-history",
            "--only-summary",
            "--stop-timeout",
            "2",
        ]
        if o.host:
            master_args += ["--host", o.host]
        self.master = self._start(master_args, "master")
        for i in range(o.workers):
            self._start(["--worker", "--master-host", "127.0.0.1", "--master-port", str(port)], f"worker-{i + 1}")
        deadline = time.monotonic() + WORKER_CONNECT_TIMEOUT_S + o.duration_s + STOP_GRACE_S
        while self.master.poll() is None:
            if time.monotonic() > deadline:
                self.stop()
                raise CommandError(f"Locust did not finish within {deadline:.0f} s: {self.log_tail()}")
            time.sleep(0.1)
        status = self.master.returncode
        self._reap_workers()
        if not os.path.exists(f"{prefix}_stats.csv"):
            raise CommandError(f"Locust wrote no statistics (exit status {status}): {self.log_tail()}")
        out = read_stats(prefix)
        out["exit_status"] = status
        return out

    def stop(self) -> None:
        """Ask the master to stop (it writes its statistics), as Ctrl-C would."""
        if self.master is not None and self.master.poll() is None:
            self.master.send_signal(signal.SIGINT)

    def _reap_workers(self) -> None:
        # Workers quit when their master does; any still there after a while are stopped.
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def join_profile(seconds: list, recording: Any) -> None:
    """Add to each of Locust's seconds the GIL utilisation of the busiest server process in it."""
    if recording is None:
        return
    per_second: dict = {}  # epoch second -> {pid: [held, passes]}
    for s in recording.sessions:
        base = recording.start_time
        for i, t in enumerate(s.times):
            second = int(base + t)
            acc = per_second.setdefault(second, {}).setdefault(s.target.pid, [0, 0])
            acc[1] += 1
            if s.pass_flags[i] & PASS_GIL_HELD:
                acc[0] += 1
    for sec in seconds:
        procs = per_second.get(sec["t"])
        sec["server_gil"] = max((h / n for h, n in procs.values() if n), default=None) if procs else None
