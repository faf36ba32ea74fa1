"""`gilty serve`'s run: sample a process tree at a low rate for as long as it runs (gilty.sampling.
capture's loop), keep its totals (gilty.observe.sidecar.Totals) and serve them as Prometheus metrics
on /metrics. When every process has exited, wait for processes with the same command lines (a
restart), re-attach, and say so in one line. Ends on Ctrl-C or SIGTERM (``stop``).
"""

from __future__ import annotations

import http.server
import os
import socket
import sys
import threading
import time
from typing import Any

from gilty._errors import EXIT_OK, CommandError, UsageError
from gilty.observe.sidecar import Totals, find_by_cmdline
from gilty.options import ServeOptions
from gilty.sampling import capture, launch

RESTART_POLL_S = 0.5


def run(options: ServeOptions, stop: Any) -> int:
    target, rate_hz = options.target, options.sampling.rate_hz
    pids = list(target.pids)
    native = launch.native_module()
    roots = {pid: _cmdline(pid) for pid in pids}
    # A kernel thread has no command line but exists: attaching says what it is (not Python, 4).
    missing = [pid for pid in pids if not os.path.isdir(f"/proc/{pid}")]
    if missing:
        raise CommandError(f"no process with pid {missing[0]}", 3)
    # Attached before the port opens and gilty says it serves: a pid that cannot be sampled is one
    # error line with its own exit status, never a "serving" line first.
    first_set = native.ProcessSet(pids, rate_hz, follow=target.subprocesses)
    totals = Totals(1.0 / rate_hz, per_thread=options.per_thread)
    try:
        server = (_Server6 if ":" in options.bind else _Server)((options.bind, options.port), _handler(totals))
    except OSError as e:
        raise UsageError(f"cannot listen on {options.bind}:{options.port}: {e.strerror or e}") from None
    _warn_unless_loopback(server.server_address[0], server.server_address[1])
    threading.Thread(target=server.serve_forever, name="gilty-serve-http", daemon=True).start()
    print(
        f"gilty: serving metrics of pid {', '.join(map(str, pids))} on http://{options.bind}:{server.server_address[1]}/metrics",
        file=sys.stderr,
    )
    try:
        while not stop.requested:
            process_set = first_set if first_set is not None else native.ProcessSet(pids, rate_hz, follow=target.subprocesses)
            first_set = None
            if not _sample(process_set, rate_hz, totals, stop):
                break
            # Every process is gone: wait for the same command lines to come back.
            print(f"gilty: pid {', '.join(map(str, pids))} exited; waiting for it to start again", file=sys.stderr)
            restarted: dict = {}
            while not stop.requested and len(restarted) < len(roots):
                for old, cmd in roots.items():
                    if old not in restarted:
                        new = find_by_cmdline(cmd, exclude=old)
                        if new is not None:
                            restarted[old] = new
                time.sleep(RESTART_POLL_S)
            if stop.requested:
                break
            time.sleep(RESTART_POLL_S)  # let the new interpreter finish starting
            pids = [restarted[p] for p in pids]
            roots = {restarted[p]: cmd for p, cmd in roots.items()}
            print(f"gilty: re-attached to pid {', '.join(map(str, pids))}", file=sys.stderr)
    finally:
        server.shutdown()
    return EXIT_OK


def _sample(process_set: Any, rate_hz: float, totals: Totals, stop: Any) -> bool:
    """Sample into ``totals`` until every process is gone (True) or stop is requested (False)."""

    def step(seconds: float) -> bool:
        got = process_set.collect(seconds)
        for event in got["events"]:
            if event["kind"] == "attached":
                totals.attached(event["pid"], event["cmdline"], event.get("ppid") or None)
        for pid, batch in got["batches"].items():
            totals.add(pid, batch)
        for event in got["events"]:
            if event["kind"] == "exited":
                totals.exited(event["pid"])
        return bool(got["finished"])

    return capture.collect_until(step, 1.0 / rate_hz, None, stop).stopped_by == "target_exit"


def _warn_unless_loopback(host: str, port: int) -> None:
    """One line when hosts other than this one can reach /metrics (it names the target's threads)."""
    import ipaddress

    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        address = None
    if address is not None and address.is_loopback:
        return
    where = f"every interface ({host})" if address is not None and address.is_unspecified else host
    print(
        f"gilty: warning: /metrics is served on {where} port {port}, not loopback only: other hosts can read it", file=sys.stderr
    )


def _handler(totals: Totals):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "gilty serves /metrics")
                return
            body = totals.exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """One line instead of socketserver's traceback: a scraper that hangs up mid-answer is no error
        of ours; anything else is said, and the next scrape is served as usual."""
        error = sys.exc_info()[1]
        if isinstance(error, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            return
        print(f"gilty: a /metrics request from {client_address[0]} failed: {type(error).__name__}: {error}", file=sys.stderr)


class _Server6(_Server):
    address_family = socket.AF_INET6  # --bind :: (every interface, IPv4 too unless the host forbids)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
