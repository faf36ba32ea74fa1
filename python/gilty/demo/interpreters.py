"""Which Python the demo service runs on: the newest CPython gilty supports that this machine has.

`make demo` shows gilty on the Python people run today, not on whatever built gilty's venv. It looks
where the test suite does (tests/conftest.py): Debian sid's interpreters unpacked by
tools/sid_pythons.py (its stamp under ``$GILTY_SID_CACHE``, default /root/.cache/gilty/sid-pythons),
pyenv's release builds, and the interpreter running the demo. Each candidate is asked its own
version; one that does not answer is passed over.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

# The oldest minor version gilty reads (crates/gilty-layouts SUPPORTED); anything newer that runs is tried.
OLDEST = (3, 10)
PROBE = "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(hasattr(sys, '_is_gil_enabled') and not sys._is_gil_enabled())"
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Interpreter:
    path: str
    version: tuple

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version))


def _sid_candidates() -> Iterator[str]:
    stamp = Path(os.environ.get("GILTY_SID_CACHE") or "/root/.cache/gilty/sid-pythons") / "stamp.json"
    try:
        interpreters = json.loads(stamp.read_text()).get("interpreters", {})
    except (OSError, ValueError, AttributeError):
        return
    for info in interpreters.values() if isinstance(interpreters, dict) else ():
        if isinstance(info, dict) and isinstance(info.get("exe"), str):
            yield info["exe"]


def _pyenv_candidates() -> Iterator[str]:
    versions = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    try:
        entries = list(versions.iterdir())
    except OSError:
        return
    for entry in entries:
        # Release builds only: no -dev, no free-threaded 't' (gilty refuses those).
        if re.fullmatch(r"3\.\d+\.\d+", entry.name):
            yield str(entry / "bin" / "python3")


def probe(path: str) -> Optional[Interpreter]:
    """The interpreter at ``path`` with its version, or None when it does not run, is too old or is
    free-threaded."""
    try:
        out = subprocess.run([path, "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        version_line, free_threaded = out.stdout.split()
        version = tuple(int(x) for x in version_line.split("."))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if out.returncode != 0 or version[:2] < OLDEST or free_threaded == "True":
        return None
    return Interpreter(path, version)


def newest() -> Interpreter:
    """The newest interpreter found; the running one when nothing newer runs."""
    found = [Interpreter(sys.executable, tuple(sys.version_info[:3]))]
    seen = {os.path.realpath(sys.executable)}
    for path in (*_sid_candidates(), *_pyenv_candidates()):
        real = os.path.realpath(path)
        if real in seen or not os.access(path, os.X_OK):
            continue
        seen.add(real)
        interp = probe(path)
        if interp is not None:
            found.append(interp)
    # The first found wins a tie: the running interpreter before a copy of the same version.
    return max(found, key=lambda i: i.version)
