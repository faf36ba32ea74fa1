"""Since fork, not since gilty first saw a worker: what each worker still shares with its master
page for page, what it copied and what it allocated itself (``_native``'s fork facts, see
crates/gilty-core/src/memory/fork_share.rs), and from that and the modules each process has imported,
whether the workers were preloaded — and when they were not, what preloading would save."""

from __future__ import annotations

import re
import statistics
from typing import Optional

from gilty.memory.session import MemorySession, ProcessRecord, last_fork_share, last_modules

# A worker most of whose pages sit at addresses the master does not map built its memory itself.
NOT_PRELOADED_NEW_SHARE = 0.5
PRELOADED_NEW_SHARE = 0.25
# This many modules imported by every worker after fork is an application imported by the workers.
MANY_IMPORTS = 20
# Names shown in the report.
SHOWN_IMPORTS = 8

_MODULE = re.compile(r"[A-Za-z_][\w.]*")


def since_fork_of(rec: ProcessRecord) -> Optional[dict]:
    """A worker's pages against its parent's at the last comparison (the JSON ``since_fork``)."""
    share = last_fork_share(rec)
    if share is None:
        return None
    present = share["present_bytes"]
    return {
        "t": share["t"],
        "present_bytes": present,
        "shared_with_parent_bytes": share["shared_with_parent_bytes"],
        "copied_bytes": share["copied_bytes"],
        "new_bytes": share["new_bytes"],
        "shared_other_bytes": share["shared_other_bytes"],
        "private_bytes": share["copied_bytes"] + share["new_bytes"],
        "new_share": share["new_bytes"] / present if present else 0.0,
        "method": share["method"],
    }


def imported_after_fork(session: MemorySession, rec: ProcessRecord) -> Optional[list]:
    """Modules in the worker's ``sys.modules`` that the master does not have (None: not readable)."""
    master = session.master
    mine = last_modules(rec)
    theirs = last_modules(master) if master is not None else None
    if mine is None or theirs is None:
        return None
    return sorted(set(mine) - set(theirs))


def gunicorn_app_module(cmdline: str) -> Optional[str]:
    """gunicorn's APP_MODULE from its command line ("pkg.wsgi:application" -> "pkg.wsgi")."""
    if "gunicorn" not in cmdline:
        return None
    words = cmdline.split()
    for prev, word in zip([""] + words, words):
        if prev in ("-b", "--bind", "-c", "--config") or word.startswith("-") or ":" not in word:
            continue
        module = word.split(":", 1)[0]
        if _MODULE.fullmatch(module):
            return module
    return None


def preload(session: MemorySession) -> dict:
    """Were the workers preloaded (forked after the master imported the application)? The JSON
    ``preload`` object: the verdict, its evidence, and what preloading would save when they were not."""
    master = session.master
    live = [w for w in session.workers if w.exited is None] or session.workers
    facts = [(w, since_fork_of(w)) for w in live]
    facts = [(w, f) for w, f in facts if f is not None]
    cmdline = master.cmdline if master is not None else ""
    app = gunicorn_app_module(cmdline)
    out = {
        "verdict": "unknown",
        "evidence": "no worker's pages could be compared with the master's",
        "gunicorn": "gunicorn" in cmdline,
        "app_module": app,
        "new_share": None,
        "imported_after_fork": None,
        "imported_after_fork_count": None,
        "footprint_per_worker_bytes": None,
        "would_save_bytes": None,
    }
    if not facts:
        return out
    new_share = statistics.median(f["new_share"] for _, f in facts)
    lists = [imported_after_fork(session, w) for w, _ in facts]
    known = [set(x) for x in lists if x is not None]
    common = sorted(set.intersection(*known)) if known else None
    master_modules = last_modules(master) if master is not None else None
    out["new_share"] = new_share
    if common is not None:
        out["imported_after_fork"] = common[:SHOWN_IMPORTS]
        out["imported_after_fork_count"] = len(common)
    pages = f"{new_share:.0%} of each worker's pages are at addresses the master does not map"
    if app and common is not None and app in common:
        verdict, evidence = "not_preloaded", f"the app module `{app}` is imported in the workers, not in the master; {pages}"
    elif app and master_modules is not None and app in master_modules:
        verdict, evidence = "preloaded", f"the app module `{app}` was imported in the master before fork; {pages}"
    elif common is not None and len(common) >= MANY_IMPORTS:
        verdict, evidence = "not_preloaded", f"every worker imported {len(common)} modules the master does not have; {pages}"
    elif new_share >= NOT_PRELOADED_NEW_SHARE:
        verdict, evidence = "not_preloaded", pages
    elif new_share < PRELOADED_NEW_SHARE:
        verdict, evidence = "preloaded", pages
    else:
        verdict, evidence = "unclear", pages
    out["verdict"], out["evidence"] = verdict, evidence
    if verdict == "not_preloaded":
        # What every worker duplicates: the smallest worker's own allocations since fork (its imports
        # and start-up objects, plus whatever it allocated serving). Preloaded, one copy would sit in
        # the master and be shared: n copies become one.
        footprint = min(f["new_bytes"] for _, f in facts)
        out["footprint_per_worker_bytes"] = footprint
        out["would_save_bytes"] = footprint * (len(facts) - 1)
    return out
