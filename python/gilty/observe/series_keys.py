"""What `gilty serve`'s series are keyed by, so that a fleet can afford them: a short process name
instead of the command line, the process's role in its tree, and thread pools folded into one
series each (thread ids and numbered names churn; pool names do not)."""

from __future__ import annotations

import os
import re

from gilty.sampling.analysis.pools import MIN_NUMBERED_POOL, pool_key

_PYTHON = re.compile(r"^(python|pypy)[\d.]*[a-z]?$")
# Options of the interpreter that take a value, so the script is found after them.
_WITH_VALUE = {"-W", "-X", "-Q"}
_MP_HELPER = re.compile(r"multiprocessing\.(resource_tracker|forkserver)\b")
# A process whose own name says nothing ("python -c ...", as multiprocessing's spawn starts its
# children) takes its parent's.
GENERIC = "python"
MAX_NAME = 40
# Names the interpreter makes up, numbered anew for every thread ("Thread-12 (_one_off)",
# "ThreadPoolExecutor-0_7", "Dummy-3") and the sampler's stand-in for a thread it saw before it had a
# name ("thread-12155"): a pool from the first one, since a busy worker may show two of them in one
# scrape and never a third.
_GENERATED = re.compile(r"^(Thread-\d+( \(.*\))?|ThreadPoolExecutor-\d+_\d+|Dummy-\d+|thread-\d+)$")


def process_name(cmdline: str) -> str:
    """``gunicorn`` for "/venv/bin/python /venv/bin/gunicorn -w 4 app:app" or "gunicorn: worker [app]",
    the module of ``python -m mod``, the script's basename without ``.py``; ``python`` otherwise."""
    args = cmdline.split()
    if not args:
        return GENERIC
    first = os.path.basename(args[0]).rstrip(":")
    if not _PYTHON.match(first):
        return first[:MAX_NAME] or GENERIC
    i = 1
    while i < len(args):
        arg = args[i]
        if arg == "-m" and i + 1 < len(args):
            return args[i + 1][:MAX_NAME]
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:][:MAX_NAME]
        if arg.startswith("-c") or arg == "-":
            # multiprocessing's helpers are not workers: name them ("python -c from
            # multiprocessing.resource_tracker import main;main(6)"); spawned workers stay generic.
            helper = _MP_HELPER.search(cmdline)
            return helper.group(1) if helper else GENERIC
        if arg in _WITH_VALUE:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        name = os.path.basename(arg)
        return (name[:-3] if name.endswith(".py") else name)[:MAX_NAME] or GENERIC
    return GENERIC


def sticky_roles(old: dict, new: dict) -> dict:
    """Roles from ``roles_of`` over the live processes, kept once decided: a master stays a master
    while its workers are being replaced (none live for a moment), so its series keep their labels."""
    return {pid: old[pid] if old.get(pid) in ("master", "worker") else role for pid, role in new.items()}


class ThreadKeys:
    """The series key of each thread of one process: its name, or its pool's key (``pool_key``:
    digits as ``#``) once MIN_NUMBERED_POOL differently numbered names of the pool were seen, as the
    text report groups them, or at once for names the interpreter numbers itself (``_GENERATED``). Same-named threads ("AnyIO worker thread") are one series from the
    start. At most ``max_series`` keys; later ones are folded into ``OTHER``."""

    OTHER = "(other)"

    def __init__(self, max_series: int = 64) -> None:
        self.max_series = max_series
        self._names: dict = {}  # pool key -> distinct names seen (kept up to MIN_NUMBERED_POOL)
        self._keys: set = set()  # keys handed out

    def key(self, name: str) -> tuple:
        """(key, folded_names): ``folded_names`` lists the names whose own series become the pool's
        now (the pool just formed), else it is empty."""
        pool = pool_key(name)
        names = self._names.get(pool)
        if names is None:
            # Names unique beyond their digits (ids in hex) would grow this without end.
            names = set() if len(self._names) >= 4 * self.max_series else self._names.setdefault(pool, set())
        folded: list = []
        if len(names) < MIN_NUMBERED_POOL and name not in names:
            names.add(name)
            if len(names) == MIN_NUMBERED_POOL:
                folded = sorted(n for n in names if n != name and n != pool)
        key = pool if len(names) >= MIN_NUMBERED_POOL or _GENERATED.match(name) else name
        if key not in self._keys:
            if len(self._keys) >= self.max_series:
                return self.OTHER, folded
            self._keys.add(key)
        for n in folded:
            self._keys.discard(n)
        return key, folded
