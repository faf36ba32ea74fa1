"""gilty's open-loop generator beside wrk (Debian package) on the same targets, one run, side by side:

1. Throughput: Debian's nginx serving a static file on 127.0.0.1. wrk (closed loop, -c N) gives the
   requests per second its connections sustain; gilty's generator is then run open loop at rising
   shares of that rate with the same number of connections, and the highest rate it keeps (see
   judge_kept) is reported with its CPU per 1,000 requests; then wrk again, to show the drift. Before
   that, gilty saturated (arrivals faster than the server answers, so every connection always has a
   next request: wrk's closed loop on gilty's code path) alternates with wrk, twice.
2. Coordinated omission: a threaded Python server answering in 20 ms is stopped (SIGSTOP) for 1 s in a
   10 s run; gilty at 100 rps open loop and wrk with 2 connections (closed loop), each on its own server.

Usage: .venv/bin/python bench/load_vs_wrk.py [--connections 64] [--seconds 5] [--part all|throughput|accuracy|stall]
Needs wrk and nginx (make system-deps). Load goes to 127.0.0.1 only; every run is bounded in time.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from gilty import _native

REPO = Path(__file__).resolve().parent.parent
NGINX_CONF = """
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy; fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
  server {{ listen 127.0.0.1:{port}; root {dir}; location / {{ }} }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def _children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def wrk(url: str, connections: int, seconds: float) -> dict:
    cpu0 = _children_cpu()
    out = subprocess.run(
        ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds:g}s", "--latency", url],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = {}
    for p in ("50", "90", "99"):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if m:
            lat[p] = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return {"rps": rps, "latency_s": lat, "raw": out, "cpu_per_k": (_children_cpu() - cpu0) / max(1, requests) * 1000}


def gilty_run(url: str, rate: float, seconds: float, connections: int) -> dict:
    plan = {
        "requests": [{"method": "GET", "url": url, "headers": [], "body": b"", "weight": 1.0}],
        "rate": float(rate),
        "duration_s": float(seconds),
        "arrivals": "constant",
        "seed": 1,
        "max_in_flight": 10_000_000,
        "timeout_s": 10.0,
        "connections": connections,
        "threads": 1,
    }
    return _native.load_run(plan)


# Rates tried, as shares of wrk's closed-loop rate, until one is not kept.
SHARES = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5)
# Kept: answers per second of wall time (the drain after the schedule included, so a queue that
# builds up does not pass) >= 99 % of the rate, at most 1 % errors, no standing queue (p50 under
# STANDING_QUEUE_S) and the generator on time (start lateness p99 <= half a gap + 1 ms).
STANDING_QUEUE_S = 0.005


def judge_kept(r: dict, rate: float) -> tuple:
    got = r["ok"] / r["wall_s"]
    cpu_per_k = r["generator"]["cpu_s"] / max(1, r["ok"]) * 1000
    failed = sum(r["errors"].values())
    reasons = []
    if got < 0.99 * rate:
        reasons.append("answers < 99 % of the rate")
    if failed > 0.01 * r["sent"]:
        reasons.append("errors > 1 %")
    if r["latency_s"]["p50"] > STANDING_QUEUE_S:
        reasons.append("a standing queue")
    if r["generator"]["lag_p99_s"] > 0.5 / rate + 0.001:
        reasons.append("generator late")
    return not reasons, ", ".join(reasons), got, cpu_per_k


def throughput(connections: int, seconds: float) -> None:
    d = tempfile.mkdtemp(prefix="gilty-nginx-")
    os.chmod(d, 0o755)  # nginx's workers run as www-data
    Path(d, "index.html").write_text("ok\n")
    os.chmod(Path(d, "index.html"), 0o644)
    port = free_port()
    Path(d, "nginx.conf").write_text(NGINX_CONF.format(dir=d, port=port))
    nginx = subprocess.Popen(["nginx", "-c", f"{d}/nginx.conf", "-p", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/index.html"
        w = wrk(url, connections, seconds)
        if "Non-2xx" in w["raw"]:
            raise SystemExit(f"nginx did not serve the file: {w['raw']}")
        print(
            f"wrk -t1 -c{connections} -d{seconds:g}s: {w['rps']:.0f} requests/s (closed loop), CPU {w['cpu_per_k'] * 1e3:.1f} ms per 1,000 requests"
        )
        # Saturated: arrivals at 1.5 x wrk's rate keep a queue of tickets, so every connection sends its
        # next request as soon as an answer is in (wrk's closed loop, on gilty's code path). Alternated
        # with wrk, so that both see the same machine.
        for round_ in (1, 2):
            r = gilty_run(url, 1.5 * w["rps"], seconds, connections)
            got = r["ok"] / r["wall_s"]
            cpu_per_k = r["generator"]["cpu_s"] / max(1, r["ok"]) * 1000
            print(
                f"gilty saturated (queue always full), round {round_}: {got:.0f} answers/s = {got / w['rps']:.2f} x wrk's {w['rps']:.0f}, "
                f"errors {r['errors'] or 0}, CPU {cpu_per_k * 1e3:.1f} ms per 1,000 requests (wrk {w['cpu_per_k'] * 1e3:.1f})"
            )
            if round_ == 1:
                w = wrk(url, connections, seconds)
                print(
                    f"wrk -t1 -c{connections} -d{seconds:g}s: {w['rps']:.0f} requests/s (closed loop), CPU {w['cpu_per_k'] * 1e3:.1f} ms per 1,000 requests"
                )
        best = None
        for share in SHARES:
            rate = round(w["rps"] * share, -1)
            r = gilty_run(url, rate, seconds, connections)
            if not r["ok"]:
                print(f"gilty at {rate:.0f} rps: no answers, errors {r['errors']}")
                break
            kept, why, got, cpu_per_k = judge_kept(r, rate)
            print(
                f"gilty open loop at {rate:.0f} rps ({share:.2f} x wrk): {got:.0f} answers/s, p50 {r['latency_s']['p50'] * 1e3:.2f} ms, "
                f"p99 {r['latency_s']['p99'] * 1e3:.2f} ms, errors {r['errors'] or 0}, lag p99 {r['generator']['lag_p99_s'] * 1e3:.2f} ms, "
                f"CPU {cpu_per_k * 1e3:.1f} ms per 1,000 requests" + ("" if kept else f"  (not kept: {why})")
            )
            if kept:
                best = (rate, cpu_per_k)
            else:
                break
        w2 = wrk(url, connections, seconds)
        print(f"wrk again: {w2['rps']:.0f} requests/s, CPU {w2['cpu_per_k'] * 1e3:.1f} ms per 1,000 requests")
        if best:
            print(
                f"highest rate kept: {best[0]:.0f} rps = {best[0] / w['rps']:.2f} x the wrk run before the open-loop steps, {best[0] / w2['rps']:.2f} x the one after; "
                f"CPU {best[1] * 1e3:.1f} ms per 1,000 requests (wrk {w['cpu_per_k'] * 1e3:.1f}, {w2['cpu_per_k'] * 1e3:.1f})"
            )
    finally:
        nginx.terminate()
        nginx.wait()
        shutil.rmtree(d, ignore_errors=True)


def stalled_server():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests/targets/http_delay_server.py"), str(port), "0.02", "threads"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port)

    def stall():
        time.sleep(4.0)
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGCONT)

    return proc, port, threading.Thread(target=stall)


def accuracy() -> None:
    """p50 against a threaded server answering in 20 ms, at rates it keeps up with (goal: within 1 ms)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests/targets/http_delay_server.py"), str(port), "0.02", "threads"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        for rate in (50, 100, 500):
            r = gilty_run(f"http://127.0.0.1:{port}/", rate, 3, 64)
            lat = r["latency_s"]
            print(
                f"gilty {rate} rps, 20 ms server: p50 {lat['p50'] * 1e3:.2f} ms, p99 {lat['p99'] * 1e3:.2f} ms, "
                f"start lateness p99 {r['generator']['lag_p99_s'] * 1e3:.2f} ms ({r['ok']} answers)"
            )
    finally:
        proc.terminate()
        proc.wait()


def coordinated_omission() -> None:
    proc, port, staller = stalled_server()
    try:
        staller.start()
        r = gilty_run(f"http://127.0.0.1:{port}/", 100, 10, 64)
        staller.join()
        lat = r["latency_s"]
        print(
            f"gilty 100 rps open loop, server stopped 1 s of 10: p50 {lat['p50'] * 1e3:.1f} ms, p90 {lat['p90'] * 1e3:.1f} ms, "
            f"p99 {lat['p99'] * 1e3:.0f} ms, max {lat['max'] * 1e3:.0f} ms ({r['ok']} answers)"
        )
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait()
    proc, port, staller = stalled_server()
    try:
        staller.start()
        w = wrk(f"http://127.0.0.1:{port}/", 2, 10)
        staller.join()
        lat = w["latency_s"]
        print(
            f"wrk -c2 closed loop, same stall: {w['rps']:.0f} requests/s, p50 {lat.get('50', 0) * 1e3:.1f} ms, "
            f"p90 {lat.get('90', 0) * 1e3:.1f} ms, p99 {lat.get('99', 0) * 1e3:.0f} ms"
        )
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--part", choices=("all", "throughput", "accuracy", "stall"), default="all")
    args = parser.parse_args()
    for tool in ("wrk", "nginx"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            print(f"load_vs_wrk: {tool} is not installed (make system-deps)", file=sys.stderr)
            return 2
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.part in ("all", "throughput"):
        throughput(args.connections, args.seconds)
    if args.part in ("all", "accuracy"):
        accuracy()
    if args.part in ("all", "stall"):
        coordinated_omission()
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
