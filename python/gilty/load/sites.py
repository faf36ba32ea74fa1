"""Where time goes as the application sees it: library frames are looked through to the library
function the application called and the application frame that called it."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A standard library's directory wherever the interpreter is installed: the target's executable does
# not always say where (uWSGI embeds Python; a venv's python is a link to another prefix's).
_STDLIB_DIR = re.compile(r"/lib/python3\.\d+t?/")


def _label(frame: tuple) -> str:
    function, file, line = frame
    return f"{function} ({file}:{line})"


def library_prefixes(session) -> tuple:
    """Path prefixes of the target's standard library (from its executable's install prefix)."""
    exe = session.target.executable or ""
    prefix = exe.rsplit("/bin/", 1)[0] if "/bin/" in exe else ""
    return (f"{prefix}/lib/python",) if prefix else ()


@dataclass(frozen=True)
class AppScope:
    """The application's own code, by path fragment: its package directory or module file from
    ``--app`` names (``httpbin``, ``shop.views``), wherever it is installed, and the packages of
    handlers found in site-packages (``including``). Built once per run and handed down as is."""

    fragments: tuple = ()

    @classmethod
    def of_packages(cls, packages) -> AppScope:
        out = []
        for name in packages or ():
            path = name.strip().strip(".").replace(".", "/")
            if path:
                out += [f"/{path}/", f"/{path}.py"]
        return cls(tuple(out))

    def __bool__(self) -> bool:
        return bool(self.fragments)

    def holds(self, file: str) -> bool:
        return any(fragment in file for fragment in self.fragments)

    def including(self, fragment: str) -> AppScope:
        """This scope with one more fragment (a handler's package)."""
        if not fragment or fragment in self.fragments:
            return self
        return AppScope((*self.fragments, fragment))


NO_APP = AppScope()


def package_fragment(file: str) -> str:
    """The fragment that names a file's top-level package inside site-packages (`/httpbin/` of
    `.../site-packages/httpbin/core.py`); "" outside site-packages (such code is the application's already)."""
    for marker in ("site-packages/", "dist-packages/"):
        head, sep, rest = file.rpartition(marker)
        if sep:
            top, slash, _ = rest.partition("/")
            return f"{marker}{top}/" if slash else f"{marker}{top}"
    return ""


def is_library(file: str, prefixes: tuple, app: AppScope = NO_APP) -> bool:
    """Outside the application: the standard library, site-packages, frozen modules, console scripts;
    code named by ``app`` (``--app``, or the package of a recognised handler) is the application's
    wherever it is installed."""
    if app.holds(file):
        return False
    # A console script pip wrote (`.venv/bin/gunicorn`, no .py) is the server's entry point, not the
    # application: a stack with nothing else outside libraries is the framework's own work.
    console_script = "/bin/" in file and not file.endswith(".py")
    return (
        "site-packages/" in file
        or "dist-packages/" in file
        or file.startswith(prefixes)
        or file.startswith("<frozen")
        or console_script
        or _STDLIB_DIR.search(file) is not None
    )


def site_key(stack: list, prefixes: tuple, app: AppScope = NO_APP) -> tuple:
    """(function, file, line, caller label) of where the time goes, as the application sees it: inside
    a library, the library function the application called (`quote`) and the application frame that
    called it (`build_url`); in the application's own code, the innermost frame and its caller."""
    k = next((i for i, f in enumerate(stack) if not is_library(f[1], prefixes, app)), None)
    if k is None:
        function, file, line = stack[0]
        return function, file, line, None
    site = stack[k - 1] if k > 0 else stack[0]
    caller_index = k if k > 0 else 1
    caller = _label(stack[caller_index]) if caller_index < len(stack) else None
    return site[0], site[1], site[2], caller
