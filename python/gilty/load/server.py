"""The server under load: the one gilty started from a command (waited for until its URL answers,
stopped at the end) or the one --profile names, and every worker answering before anything is
measured."""

from __future__ import annotations

import http.client
import sys
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from gilty._errors import EXIT_SERVER_NOT_READY, EXIT_TARGET_EXITED, CommandError
from gilty.load import ready
from gilty.load.options import ServerOptions
from gilty.sampling import capture

SERVER_START_TIMEOUT_S = 30.0


@dataclass
class Server:
    pids: Optional[list]  # the processes to profile (and their descendants); None: not profiled
    child: Any = None  # the server command's process, when gilty started it
    readiness: Optional[ready.Readiness] = None


@contextmanager
def serving(options: ServerOptions, url: Optional[str], stop: Any) -> Iterator[Server]:
    """The server while the load runs: a command started (and stopped when the block ends, however it
    ends), waited for until ``url`` answers, then every worker waited for."""
    with capture.Command(options.command) as command:
        server = Server([options.pid] if options.pid is not None else None, command.process)
        if server.child is not None:
            wait_until_listening(url, server.child, stop=stop)
            server.pids = [server.child.pid]
        if server.pids is not None and url is not None and not stop.requested:
            server.readiness = wait_for_workers(url, server.pids[0], server.child)
        yield server


def wait_until_listening(url: str, child, timeout_s: float = SERVER_START_TIMEOUT_S, stop=None) -> None:
    """Until a GET of the URL gets an HTTP answer (any status): a prefork server's master accepts
    connections before its workers have imported the app. A server that exits first is one line."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if stop is not None and stop.requested:
            raise KeyboardInterrupt  # Ctrl-C before anything was loaded: `gilty: interrupted`, 130
        if child.poll() is not None:
            raise CommandError(
                f"the server command exited with status {child.returncode} before {host}:{port} answered", EXIT_TARGET_EXITED
            )
        conn = http.client.HTTPConnection(host, port, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
        try:
            conn.request("GET", path)
            conn.getresponse().read()
            return
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
        finally:
            conn.close()
    raise CommandError(f"the server did not answer on {host}:{port} within {timeout_s:g} s", EXIT_SERVER_NOT_READY)


def wait_for_workers(url: str, root: int, child=None) -> Optional[ready.Readiness]:
    """Every worker of the server answering before the load is measured (said on stderr, with how
    long it took): load on workers still importing their application measures start-up."""
    alive = (lambda: child.poll() is None) if child is not None else (lambda: True)
    r = ready.wait_for_workers(url, root, SERVER_START_TIMEOUT_S, alive)
    if r is None:
        return None
    n = len(r.workers)
    what = f"{n} worker{'s' if n != 1 else ''}" if n != 1 or r.workers[0] != root else "the server"
    if r.router:
        router = ", ".join(map(str, r.router))
        state = "settled" if r.complete else "not settled (their start-up may show in the first step)"
        print(
            f"gilty: the server answered through its router (pid {router}) in {r.seconds:.1f} s; {what} behind it "
            f"(pid{'s' if n != 1 else ''} {', '.join(map(str, r.workers))}), {state}",
            file=sys.stderr,
        )
        return r
    if r.complete:
        print(
            f"gilty: {what} answered in {r.seconds:.1f} s (pid{'s' if n != 1 else ''} {', '.join(map(str, r.workers))})",
            file=sys.stderr,
        )
    else:
        print(
            f"gilty: warning: {len(r.answered)} of {n} workers answered within {r.seconds:.0f} s; "
            f"not pid {', '.join(map(str, r.missing))}: their start-up may show in the first step",
            file=sys.stderr,
        )
    return r
