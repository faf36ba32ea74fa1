"""Getting a target that is already running: loading the native module, attaching to a pid, and
finding a pid's descendants. Kept apart from gilty.sampling.launch, which starts and stops commands,
so a one-shot read (`gilty dump`) loads neither `signal` nor the launch code."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Any

from gilty._errors import CommandError


def native_module() -> ModuleType:
    """``gilty._native``, or a one-line error when the extension is not built."""
    try:
        return importlib.import_module("gilty._native")
    except ImportError as e:
        raise CommandError(f"gilty's native extension is not available ({e}); build it with `make setup`") from None


def attach(native: ModuleType, pid: int) -> Any:
    """``_native.Target(pid)``; GiltyError propagates to ``cli.main``, which maps its kind."""
    return native.Target(pid)


def child_pids(pid: int) -> list:
    """Descendants of ``pid``, nearest first (breadth-first), read from /proc."""
    children: dict = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # exited while we looked
        # The command name in parentheses may itself contain spaces or ')': split after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 2:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found = []
    queue = sorted(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(sorted(children.get(child, [])))
    return found
