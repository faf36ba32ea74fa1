"""Waiting until every worker of a server answers, before any load is measured: a prefork master
accepts connections as soon as it listens, while its workers may still be importing the application
(and Django imports its views on each worker's first request). Load measured meanwhile is start-up.

The workers are the processes of the server's tree that hold its listening socket (a master that
forked them holds it too and is left out: it has a holder below it). Which worker took a connection is
read from /proc: the accepted socket's inode (/proc/net/tcp, by the client's port) among each
worker's open files. Each round opens a connection per worker plus one and sends the first line of
a request only, so that a worker that accepted one holds it (a sync worker then takes no other) while
gilty finds out which worker it is; then the request is completed and its answer read. Only /proc is
read: nothing in the server is changed.
"""

from __future__ import annotations

import os
import socket
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Callable, Optional

from gilty.sampling import helpers

LISTEN, ESTABLISHED = "0A", "01"
ROUND_TIMEOUT_S = 5.0
STALL_S = 10.0  # give up when for this long no other worker answered and none still starting used CPU


@dataclass
class Readiness:
    workers: list  # pids that hold the listening socket (the master left out)
    answered: list  # those seen answering a request
    seconds: float  # from the first answer until every worker had answered (or until gilty gave up)
    complete: bool = True
    rounds: int = 0
    missing: list = field(default_factory=list)
    # Helpers of the master that hold the listening socket in front of the workers (uWSGI's --http
    # router): they answered; which worker behind them served a request cannot be told from here.
    router: list = field(default_factory=list)


def _children_map() -> dict:
    kids: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def process_tree(root: int) -> list:
    """``root`` and its descendants, parents first."""
    kids = _children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(sorted(kids.get(pid, [])))
    return out


def workers(root: int, port: int) -> list:
    """Pids of ``root``'s tree that hold a socket listening on ``port``, less those with such a holder
    below them (a master that forked its workers)."""
    listening = {inode for lport, _r, state, inode in helpers.tcp_table() if state == LISTEN and lport == port}
    if not listening:
        return []
    tree = process_tree(root)
    holders = [pid for pid in tree if helpers.socket_inodes(pid) & listening]
    kids = _children_map()

    def below(pid):
        todo, seen = list(kids.get(pid, [])), set()
        while todo:
            p = todo.pop()
            if p not in seen:
                seen.add(p)
                todo.extend(kids.get(p, []))
        return seen

    return [pid for pid in holders if not (below(pid) & set(holders))]


def _cpu_ticks(pids: set) -> dict:
    """{pid: user + system clock ticks} from /proc/PID/stat."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[pid] = int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _owner(server_port: int, client_port: int, pids: list) -> Optional[int]:
    inodes = {
        inode
        for lport, rport, state, inode in helpers.tcp_table()
        if lport == server_port and rport == client_port and state == ESTABLISHED and inode != "0"
    }
    if not inodes:
        return None
    for pid in pids:
        if helpers.socket_inodes(pid) & inodes:
            return pid
    return None


def _round(host: str, port: int, path: str, pids: list, count: int, deadline: float) -> set:
    """Opens ``count`` connections with a request's first lines, finds which worker accepted each,
    completes the requests; returns the pids whose request got an HTTP answer."""
    conns = []
    try:
        for _ in range(count):
            c = socket.create_connection((host, port), timeout=max(0.5, min(ROUND_TIMEOUT_S, deadline - time.monotonic())))
            c.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n".encode())
            conns.append([c, c.getsockname()[1], None])
        until = min(deadline, time.monotonic() + 1.0)
        while time.monotonic() < until and any(owner is None for _c, _p, owner in conns):
            for entry in conns:
                if entry[2] is None:
                    entry[2] = _owner(port, entry[1], pids)
            time.sleep(0.02)
        answered = set()
        for c, _p, owner in conns:
            c.sendall(b"Connection: close\r\n\r\n")
        for c, _p, owner in conns:
            try:
                head = c.recv(16)
            except OSError:
                head = b""
            if head.startswith(b"HTTP/") and owner is not None:
                answered.add(owner)
        return answered
    finally:
        for c, _p, _o in conns:
            c.close()


def _behind_router(root: int, holders: list) -> list:
    """The workers behind ``holders`` when every holder is a helper of its master (a router that
    forwards to its sibling workers, which listen elsewhere); else []."""
    facts = helpers.read_all(process_tree(root))
    found = helpers.helpers(facts, roots=(root,))
    if not holders or any(pid not in found or pid not in facts for pid in holders):
        return []
    parents = {facts[pid].ppid for pid in holders}
    return sorted(pid for pid, f in facts.items() if f.ppid in parents and pid not in found)


# Workers behind a router are taken as started once none of them used CPU for this long.
SETTLED_S = 0.5


def _wait_through_router(
    host: str, port: int, path: str, router: list, behind: list, start: float, deadline: float, alive: Callable[[], bool]
) -> Readiness:
    """Until the router answers and its workers stop using CPU (none is still importing)."""
    rounds = 0
    answered = False
    while time.monotonic() < deadline and alive() and not answered:
        rounds += 1
        try:
            answered = bool(_round(host, port, path, router, 1, deadline))
        except OSError:
            time.sleep(0.1)
    ticks = _cpu_ticks(set(behind))
    settled = time.monotonic()
    while answered and time.monotonic() < deadline and alive() and time.monotonic() - settled < SETTLED_S:
        time.sleep(0.1)
        now = _cpu_ticks(set(behind))
        if now != ticks:
            ticks, settled = now, time.monotonic()
    complete = answered and time.monotonic() - settled >= SETTLED_S
    return Readiness(behind, [], time.monotonic() - start, complete, rounds, [] if complete else list(behind), list(router))


def wait_for_workers(url: str, root: int, timeout_s: float, alive: Callable[[], bool] = lambda: True) -> Optional[Readiness]:
    """Until every worker of ``root``'s tree has answered a GET of ``url`` (any status), at most
    ``timeout_s``; None when no process of the tree is seen listening on the URL's port."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    start = time.monotonic()
    deadline = start + timeout_s
    answered: set = set()
    rounds = 0
    pids = workers(root, port)
    if not pids:
        return None
    behind = _behind_router(root, pids)
    if behind:
        return _wait_through_router(host, port, path, pids, behind, start, deadline, alive)
    progress = start
    ticks: dict = {}
    while time.monotonic() < deadline and alive():
        rounds += 1
        try:
            new = _round(host, port, path, pids, len(pids) + 1, deadline) - answered
        except OSError:
            new = set()
            time.sleep(0.1)
        busy = _cpu_ticks(set(pids) - answered - new)
        if new or busy != ticks:  # a worker answered, or one still starting used CPU meanwhile
            answered |= new
            ticks = busy
            progress = time.monotonic()
        elif answered and time.monotonic() - progress > STALL_S:
            break  # idle workers that never take a connection: a master accepts for them
        pids = workers(root, port) or pids  # workers still being forked join the set
        if set(pids) <= answered:
            return Readiness(pids, sorted(answered & set(pids)), time.monotonic() - start, True, rounds)
    return Readiness(pids, sorted(answered & set(pids)), time.monotonic() - start, False, rounds, sorted(set(pids) - answered))
