"""Workers and helpers among a master's children (issue 31).

A prefork master's workers run the application: the same program, set up the same way. Beside them a
master often forks helpers that serve no request of their own: uWSGI's --http router, spoolers and
mules, Celery's beat, multiprocessing's resource tracker. Counted as workers they ruin every per-worker
figure (a 0.2 MiB router is "the smallest worker"), so they are told apart from what /proc shows:

1. a known helper's command line (multiprocessing's resource tracker and fork server, celery beat);
2. signal handling: workers of one server install the same handlers (SigCgt/SigIgn of
   /proc/PID/status); of several sets among siblings of one program, the largest group holds the
   workers (a tie goes to the group with several times the others' private memory) and a sibling
   whose handling differs from theirs in several signals is a helper.

Only /proc is read; nothing in the processes is changed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

# (command-line fragment, what the helper is)
KNOWN = (
    ("multiprocessing.resource_tracker", "multiprocessing's resource tracker"),
    ("multiprocessing.semaphore_tracker", "multiprocessing's semaphore tracker"),
    ("multiprocessing.forkserver", "multiprocessing's fork server"),
    ("celery beat", "Celery's beat"),
)
# Signals handled differently (caught or ignored by one side only) before siblings count as doing different
# jobs: application code may install a handler or two in some workers only (an alarm for a timeout);
# uWSGI's --http router differs from its workers in 14.
SIGNALS_APART = 4
# With as many processes on each side, the group with this many times the other's private memory
# (per process) holds the workers; closer than that, nothing is said.
TIE_PRIVATE_RATIO = 4.0

_DIGITS = re.compile(r"\d+")


@dataclass
class Facts:
    """What /proc says about one process, for telling workers from helpers."""

    pid: int
    ppid: int
    exe: str = ""
    cmdline: str = ""
    caught: int = 0  # SigCgt
    ignored: int = 0  # SigIgn
    private_bytes: int = 0
    listens: tuple = ()  # ports of TCP sockets it holds in LISTEN state


def tcp_table() -> list:
    """[(local port, remote port, state, inode)] of every TCP socket in this network namespace."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) < 10:
                        continue
                    local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
                    out.append((int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16), state, inode))
        except OSError:
            continue
    return out


def socket_inodes(pid: int) -> set:
    """Inodes of the sockets ``pid`` holds open (from its /proc/PID/fd links)."""
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                out.add(link[8:-1])
    except OSError:
        pass
    return out


def _listening_ports() -> dict:
    """{socket inode: port} of the TCP sockets listening in this network namespace."""
    return {inode: port for port, _remote, state, inode in tcp_table() if state == "0A"}


def read_facts(pid: int, listening: Optional[dict] = None) -> Optional[Facts]:
    """The facts of a live process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return None
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    private = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    private += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    ports = {listening[inode] for inode in socket_inodes(pid) & listening.keys()} if listening else set()
    try:
        return Facts(
            pid=pid,
            ppid=int(status["PPid"]),
            exe=exe,
            cmdline=cmdline,
            caught=int(status.get("SigCgt", "0"), 16),
            ignored=int(status.get("SigIgn", "0"), 16),
            private_bytes=private,
            listens=tuple(sorted(ports)),
        )
    except (KeyError, ValueError):
        return None


def read_all(pids) -> dict:
    """{pid: Facts} of the live processes among ``pids``."""
    listening = _listening_ports()
    out = {}
    for pid in pids:
        f = read_facts(pid, listening)
        if f is not None:
            out[pid] = f
    return out


def helpers(facts: dict, roots: tuple = ()) -> dict:
    """{pid: what it is} for the helpers among the children in ``facts`` ({pid: Facts}); a process of
    ``roots`` (the masters asked about) is never one."""
    by_parent: dict = {}
    for f in facts.values():
        if f.pid not in roots:
            by_parent.setdefault(f.ppid, []).append(f)
    out = {}
    for ppid, kids in by_parent.items():
        out.update(_helpers_among(kids))
    return out


def _what(helper: Facts, workers: list, why: str) -> str:
    mine = set(helper.listens) - {p for w in workers for p in w.listens}
    if mine:
        ports = ", ".join(f":{p}" for p in sorted(mine))
        return f"router: listens on {ports}, which its workers do not; {why}"
    return why


def _helpers_among(kids: list) -> dict:
    out = {}
    rest = []
    for k in kids:
        known = next((what for fragment, what in KNOWN if fragment in k.cmdline), None)
        if known:
            out[k.pid] = known
        else:
            rest.append(k)
    # Siblings of one program are compared; a child running another program is a child, not a helper.
    programs: dict = {}
    for k in rest:
        programs.setdefault((k.exe, _DIGITS.sub("#", k.cmdline)), []).append(k)
    for group in programs.values():
        if len(group) < 2:
            continue
        out.update(_by_signals(group))
    return out


def _by_signals(group: list) -> dict:
    sets: dict = {}
    for k in group:
        sets.setdefault((k.caught, k.ignored), []).append(k)
    if len(sets) < 2:
        return {}
    ranked = sorted(sets.values(), key=len, reverse=True)
    workers = ranked[0]
    if len(ranked[1]) == len(workers):

        def per_process(g: list) -> float:
            return sum(k.private_bytes for k in g) / len(g)

        tied = [g for g in ranked if len(g) == len(workers)]
        tied.sort(key=per_process, reverse=True)
        if per_process(tied[0]) < TIE_PRIVATE_RATIO * max(1.0, per_process(tied[1])):
            return {}
        workers = tied[0]
    n = len(workers)
    mask = (workers[0].caught, workers[0].ignored)
    out = {}
    for g in ranked:
        apart = bin(g[0].caught ^ mask[0]).count("1") + bin(g[0].ignored ^ mask[1]).count("1")
        if g is workers or apart < SIGNALS_APART:
            continue
        for k in g:
            out[k.pid] = _what(k, workers, f"handles signals unlike its {n} sibling worker{'s' * (n != 1)} of the same program")
    return out
