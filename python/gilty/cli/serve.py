"""Serve Prometheus metrics of a running process tree, sampled from outside: no code change.

  gilty serve --pid MASTER --subprocesses                  # http://127.0.0.1:9464/metrics
  gilty serve --pid 4242 --rate 20 --bind 0.0.0.0 --port 9500

Samples the process (and with -s its Python descendants: workers replaced after --max-requests are
picked up) at a low rate for as long as it runs, and serves GIL hold / wait seconds and every state's
seconds per thread name (pools of numbered threads folded; --per-thread: per thread id), labelled with
the process's role and short name, and per process its GIL utilisation, GC time and memory. When the process itself exits, gilty waits for a process with the same command
line (a restart), re-attaches, and says so in one line. Stops on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import http.server
import os
import socket
import sys
import threading
import time

from gilty._errors import EXIT_OK, CommandError, UsageError
from gilty.cli.options import add_pid_arguments, port_number, sampling_rate
from gilty.observe.sidecar import Totals, find_by_cmdline
from gilty.sampling import launch

DEFAULT_RATE_HZ = 10.0
DEFAULT_PORT = 9464
SLICE_S = 0.1
RESTART_POLL_S = 0.5


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = "gilty serve --pid PID [--pid PID ...] [-s] [--rate HZ] [--bind ADDR] [--port PORT] [--per-thread]"
    add_pid_arguments(parser, required=True)
    parser.add_argument(
        "--rate", type=sampling_rate, default=DEFAULT_RATE_HZ, metavar="HZ", help="samples per second (default: %(default)g)"
    )
    parser.add_argument(
        "--bind",
        type=listen_address,
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default: loopback only; 0.0.0.0 or :: for every interface)",
    )
    parser.add_argument("--port", type=port_number, default=DEFAULT_PORT, help="port of /metrics (default: %(default)d)")
    parser.add_argument(
        "--per-thread",
        action="store_true",
        help="one series per thread id (label tid) instead of one per thread name with numbered pools folded",
    )


def listen_address(text: str) -> str:
    """--bind's value: an empty one makes a server listen on every interface, which is not to happen
    unasked."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty address would listen on every interface: give 0.0.0.0 (or ::) to mean that")
    return text.strip()


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


def _sample(native, pids: list, follow: bool, rate: float, totals: Totals, stop, process_set=None) -> bool:
    """Sample until every process is gone (True) or stop is requested (False)."""
    if process_set is None:
        process_set = native.ProcessSet(pids, rate, follow=follow)
    while not stop.requested:
        got = process_set.collect(SLICE_S)
        for event in got["events"]:
            if event["kind"] == "attached":
                totals.attached(event["pid"], event["cmdline"], event.get("ppid") or None)
        for pid, batch in got["batches"].items():
            totals.add(pid, batch)
        for event in got["events"]:
            if event["kind"] == "exited":
                totals.exited(event["pid"])
        if got["finished"]:
            return True
    return False


def run(args: argparse.Namespace) -> int:
    pids = list(args.pid)
    native = launch.native_module()
    roots = {pid: _cmdline(pid) for pid in pids}
    # A kernel thread has no command line but exists: attaching says what it is (not Python, 4).
    missing = [pid for pid in pids if not os.path.isdir(f"/proc/{pid}")]
    if missing:
        raise CommandError(f"no process with pid {missing[0]}", 3)
    # Attached before the port opens and gilty says it serves: a pid that cannot be sampled is one
    # error line with its own exit status, never a "serving" line first.
    first_set = native.ProcessSet(pids, args.rate, follow=bool(args.subprocesses))
    totals = Totals(1.0 / args.rate, per_thread=bool(args.per_thread))
    try:
        server = (_Server6 if ":" in args.bind else _Server)((args.bind, args.port), _handler(totals))
    except OSError as e:
        raise UsageError(f"cannot listen on {args.bind}:{args.port}: {e.strerror or e}") from None
    _warn_unless_loopback(server.server_address[0], server.server_address[1])
    threading.Thread(target=server.serve_forever, name="gilty-serve-http", daemon=True).start()
    print(
        f"gilty: serving metrics of pid {', '.join(map(str, pids))} on http://{args.bind}:{server.server_address[1]}/metrics",
        file=sys.stderr,
    )
    with launch.StopSignals() as stop:
        try:
            while not stop.requested:
                done = _sample(native, pids, bool(args.subprocesses), args.rate, totals, stop, first_set)
                first_set = None
                if not done:
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
