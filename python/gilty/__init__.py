"""gilty: who holds the GIL, who waits for it, and why — sampled from outside a CPython process.

The native sampler lives in ``gilty._native`` (a PyO3 extension). Its public names are
re-exported lazily so that ``import gilty`` works, and the pure-Python parts (session,
analysis, renderers) can be used and tested, when the extension is not built.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Any

from gilty._errors import CommandError


def _installed_version() -> str:
    # Read on first use: importing importlib.metadata costs a CLI run tens of milliseconds.
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("gilty")
        except PackageNotFoundError:  # running from a source tree (PYTHONPATH=python)
            return "0+unknown"
    except ImportError:  # pragma: no cover - importlib.metadata is stdlib since 3.8
        return "0+unknown"


# Names forwarded to gilty._native on first use.
_NATIVE_NAMES = ("GiltyError", "Target", "Sampler", "syscall_name")

__all__ = ["__version__", "CommandError", "gil_stats", *_NATIVE_NAMES]


def gil_stats(windows: tuple = (1, 10, 60)) -> dict:
    """This process's per-thread GIL shares since ``gilty.observe.monitor.start()`` (see gilty.observe.monitor)."""
    from gilty.observe.monitor import gil_stats as stats

    return stats(windows)


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value = _installed_version()
        globals()["__version__"] = value
        return value
    if name in _NATIVE_NAMES:
        # Importing here, not at module import, keeps `import gilty` working without the extension.
        from gilty import _native

        return getattr(_native, name)
    raise AttributeError(f"module 'gilty' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NATIVE_NAMES) | {"__version__"})
