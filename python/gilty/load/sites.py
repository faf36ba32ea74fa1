"""Where time goes as the application sees it: library frames are looked through to the library
function the application called and the application frame that called it."""

from __future__ import annotations


def _label(frame: tuple) -> str:
    function, file, line = frame
    return f"{function} ({file}:{line})"


def library_prefixes(session) -> tuple:
    """Path prefixes of the target's standard library (from its executable's install prefix)."""
    exe = session.target.executable or ""
    prefix = exe.rsplit("/bin/", 1)[0] if "/bin/" in exe else ""
    return (f"{prefix}/lib/python",) if prefix else ()


def is_library(file: str, prefixes: tuple) -> bool:
    # A console script pip wrote (`.venv/bin/gunicorn`, no .py) is the server's entry point, not the
    # application: a stack with nothing else outside libraries is the framework's own work.
    console_script = "/bin/" in file and not file.endswith(".py")
    return ("site-packages/" in file or "dist-packages/" in file or file.startswith(prefixes)
            or file.startswith("<frozen") or console_script)


def site_key(stack: list, prefixes: tuple) -> tuple:
    """(function, file, line, caller label) of where the time goes, as the application sees it: inside
    a library, the library function the application called (`quote`) and the application frame that
    called it (`build_url`); in the application's own code, the innermost frame and its caller."""
    k = next((i for i, f in enumerate(stack) if not is_library(f[1], prefixes)), None)
    if k is None:
        function, file, line = stack[0]
        return function, file, line, None
    site = stack[k - 1] if k > 0 else stack[0]
    caller_index = k if k > 0 else 1
    caller = _label(stack[caller_index]) if caller_index < len(stack) else None
    return site[0], site[1], site[2], caller
