"""The target's extension modules, read from outside (``Target.extension_modules``, Rust
``interp/module_slots.rs``), with the package each came from.

The package is the first directory under ``site-packages`` (or Debian's ``dist-packages``) of the
module's file; the distribution, the ``*.dist-info`` whose RECORD lists that file. Files are read
through ``/proc/PID/root`` so that a target in another mount namespace (a container) is looked up in
its own tree.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from gilty.readiness.model import ModuleInfo, ModuleScan

_SITE_DIRS = ("/site-packages/", "/dist-packages/")
# Bounds on the dist-info lookup: distributions looked at per site dir, bytes of one RECORD.
MAX_DISTS = 2000
MAX_RECORD = 1 << 20


def package_of(path: Optional[str], builtin: bool) -> str:
    """ "numpy" for .../site-packages/numpy/core/_x.so, "stdlib" for lib-dynload, "builtin" for the
    interpreter's own, else ""."""
    if builtin:
        return "builtin"
    if not path:
        return ""
    for marker in _SITE_DIRS:
        if marker in path:
            first = path.split(marker, 1)[1].split("/", 1)[0]
            return first.split(".", 1)[0]
    if "/lib-dynload/" in path:
        return "stdlib"
    return ""


def _site_dir(path: str) -> Optional[tuple]:
    for marker in _SITE_DIRS:
        if marker in path:
            head, rest = path.split(marker, 1)
            return head + marker.rstrip("/"), rest
    return None


def _dist_of(pid: int, path: str, cache: dict) -> Optional[str]:
    """The "name-version" of the .dist-info whose RECORD lists ``path``, or None."""
    found = _site_dir(path)
    if found is None:
        return None
    site, rel = found
    if site not in cache:
        cache[site] = _records(f"/proc/{pid}/root{site}")
    for dist, files in cache[site]:
        if rel in files:
            return dist
    return None


def _records(site: str) -> list:
    out = []
    try:
        names = sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))[:MAX_DISTS]
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(site, name, "RECORD"), encoding="utf-8", errors="replace") as f:
                text = f.read(MAX_RECORD)
        except OSError:
            continue
        files = {line.split(",", 1)[0] for line in text.splitlines()}
        out.append((name[: -len(".dist-info")], files))
    return out


def read(target: Any) -> dict:
    """The raw scan of a native Target, each module with its "package" and "dist" added: the form
    the recording keeps (``Session.free_threading["modules"]``)."""
    raw = target.extension_modules()
    cache: dict = {}
    for m in raw["modules"]:
        m["package"] = package_of(m["path"], m["builtin"])
        m["dist"] = _dist_of(target.pid, m["path"], cache) if m["path"] and not m["builtin"] else None
    return raw


def scan_from_raw(raw: Optional[dict], python_version: str, error: Optional[str] = None) -> ModuleScan:
    """The ModuleScan of a kept raw scan (None: not read, ``error`` says why)."""
    if raw is None:
        return ModuleScan(None, error or "the modules were not read", python_version)
    modules = [
        ModuleInfo(
            name=str(m["name"]),
            init=str(m["init"]),
            gil=str(m["gil"]),
            path=m.get("path"),
            builtin=bool(m.get("builtin")),
            package=str(m.get("package") or ""),
            dist=m.get("dist"),
            unknown_why=m.get("unknown_why"),
            def_name=m.get("def_name"),
        )
        for m in raw.get("modules", [])
    ]
    note = None
    if raw.get("unreadable"):
        note = f"partial: {raw['unreadable']} module(s) did not read ({raw.get('first_error')})"
    return ModuleScan(modules, note, python_version)
