"""Keep a preloaded heap shared between a prefork master and its workers.

A forked worker shares every page of its master's heap until it writes to one; then the kernel
copies that page (copy-on-write). CPython's garbage collector writes to every object it traverses
(the ``PyGC_Head`` links in front of each tracked object), so the first full collection in a
worker turns most of the preloaded heap private. The known-good pattern (``gc.freeze()``,
bpo-31558) avoids that:

1. ``master_start()``: stop automatic collection early in the master, before the application is
   imported, so nothing is collected (and no page dirtied) while the heap is built;
2. ``before_fork()``: just before forking, collect once (so no garbage gets frozen — Airflow
   #60505) and ``gc.freeze()``: every tracked object moves to the permanent generation, which
   collections never traverse;
3. ``after_fork_in_child()``: restart automatic collection in each worker. It now only sees
   objects created after the fork.

Reference counting still writes to objects the worker *reads*; nothing here prevents that part
of copy-on-write (``gilty memory`` tells the two apart).

Server-specific modules: ``gilty.memory.prefork.gunicorn`` (a config module and importable hooks) and
``gilty.memory.prefork.uwsgi``. For a plain ``os.fork()`` or ``multiprocessing`` ("fork" start method)
server, call ``install_fork_hooks()`` before importing the application. docs/prefork.md has the
details and the trade-offs of each option.

This module imports nothing from gilty's native extension: it runs inside the application,
under any Python 3.8+.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Tuple

__all__ = [
    "PreforkOptions",
    "options_from_env",
    "master_start",
    "before_fork",
    "after_fork_in_child",
    "install_fork_hooks",
    "install_fast_exit",
    "status",
]

MODES = ("disable", "threshold0")


@dataclass(frozen=True)
class PreforkOptions:
    """How the hooks behave.

    - ``mode``: how automatic collection is stopped in the master. ``"disable"`` calls
      ``gc.disable()``; ``"threshold0"`` calls ``gc.set_threshold(0)`` instead, which a library
      calling ``gc.enable()`` (msgpack did, at Instagram) cannot undo.
    - ``collect_before_freeze``: run one full collection before the first freeze, so garbage is
      not frozen for the life of the workers. It runs in the master, before any worker exists.
    - ``fast_exit``: in workers, end the process with ``os._exit`` right after the ``atexit``
      handlers, skipping interpreter finalisation and its final collection, which would copy
      every page again just before the process dies (worker recycling, restarts).
    - ``enable_in_parent``: restart automatic collection in the master after each fork (off:
      the master of a prefork server allocates little and stays frozen in time).
    """

    mode: str = "disable"
    collect_before_freeze: bool = True
    fast_exit: bool = False
    enable_in_parent: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")


def _flag(value: Optional[str], default: bool) -> bool:
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def options_from_env(env: Optional[Mapping[str, str]] = None) -> PreforkOptions:
    """Options from ``GILTY_PREFORK_GC`` (disable | threshold0), ``GILTY_PREFORK_COLLECT`` (1),
    ``GILTY_PREFORK_FAST_EXIT`` (0) and ``GILTY_PREFORK_ENABLE_IN_PARENT`` (0)."""
    env = os.environ if env is None else env
    mode = (env.get("GILTY_PREFORK_GC") or "disable").strip().lower()
    if mode not in MODES:
        raise ValueError(f"GILTY_PREFORK_GC must be one of {', '.join(MODES)}, not {mode!r}")
    return PreforkOptions(
        mode=mode,
        collect_before_freeze=_flag(env.get("GILTY_PREFORK_COLLECT"), True),
        fast_exit=_flag(env.get("GILTY_PREFORK_FAST_EXIT"), False),
        enable_in_parent=_flag(env.get("GILTY_PREFORK_ENABLE_IN_PARENT"), False),
    )


class _State:
    """What the hooks did in this process (inherited by forked children)."""

    options: PreforkOptions = PreforkOptions()
    started = False
    # Thresholds and enabled flag in force before master_start() changed them.
    saved_thresholds: Tuple[int, ...] = gc.get_threshold()
    saved_enabled = gc.isenabled()
    master_pid: Optional[int] = None
    collected: Optional[int] = None
    freezes = 0
    fast_exit_registered = False
    fast_exit_active = False
    exit_code: Any = 0
    fork_hooks_installed = False


def master_start(options: Optional[PreforkOptions] = None) -> None:
    """Stop automatic collection in this (master) process. Call it before importing the
    application. Idempotent; a second call only updates the options."""
    if options is not None:
        _State.options = options
    if not _State.started:
        _State.saved_thresholds = gc.get_threshold()
        _State.saved_enabled = gc.isenabled()
        _State.master_pid = os.getpid()
        _State.started = True
    if _State.options.mode == "threshold0":
        gc.set_threshold(0)
    else:
        gc.disable()
    if _State.options.fast_exit:
        install_fast_exit()


def before_fork() -> None:
    """In the master, right before each fork: collect once (the first time), then freeze."""
    if not _State.started:
        master_start()
    if _State.collected is None and _State.options.collect_before_freeze:
        _State.collected = gc.collect()
    gc.freeze()
    _State.freezes += 1


def after_fork_in_parent() -> None:
    """In the master, right after each fork."""
    if _State.options.enable_in_parent:
        _restore_collection()


def after_fork_in_child() -> None:
    """In each worker, right after the fork: automatic collection back on, as it was before
    ``master_start()`` (the frozen objects stay frozen)."""
    _restore_collection()
    if _State.options.fast_exit:
        install_fast_exit()
        _State.fast_exit_active = True


def _restore_collection() -> None:
    gc.set_threshold(*_State.saved_thresholds)
    if _State.saved_enabled:
        gc.enable()


def install_fork_hooks(options: Optional[PreforkOptions] = None) -> None:
    """For servers that fork with ``os.fork()`` (or ``multiprocessing`` with the "fork" start
    method): ``master_start()`` now, then ``before_fork`` / ``after_fork_in_child`` around every
    fork, through ``os.register_at_fork``. Call it before importing the application."""
    master_start(options)
    if not _State.fork_hooks_installed:
        os.register_at_fork(before=before_fork, after_in_parent=after_fork_in_parent, after_in_child=after_fork_in_child)
        _State.fork_hooks_installed = True


# -- fast exit ------------------------------------------------------------------------------------


def _remember_exit(original: Callable[..., Any]) -> Callable[..., Any]:
    def exit(status: Any = None) -> Any:  # noqa: A001 - stands in for sys.exit
        _State.exit_code = status
        return original(status)

    exit.__doc__ = original.__doc__
    exit.__wrapped__ = original  # type: ignore[attr-defined]
    return exit


def _exit_status(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1  # sys.exit("message"): the message was printed already


def _fast_exit() -> None:
    """The last atexit handler: flush what finalisation would have flushed, then leave."""
    if not _State.fast_exit_active or os.getpid() == _State.master_pid:
        return
    if "logging" in sys.modules:
        # logging registers its own atexit handler at import, usually before ours, so it would
        # otherwise be skipped.
        try:
            sys.modules["logging"].shutdown()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001
            pass
    code = _State.exit_code
    if getattr(sys, "last_value", None) is not None and not isinstance(sys.last_value, SystemExit):
        code = 1  # an uncaught exception ended the program
    os._exit(_exit_status(code))


def install_fast_exit() -> None:
    """Register the fast exit (active only in forked children, see ``after_fork_in_child``).

    atexit handlers run in reverse order of registration, so this one — registered early, in
    the master — runs after the application's own handlers, then skips ``Py_Finalize``.
    The exit status is the one given to ``sys.exit()`` (``raise SystemExit(n)`` directly is
    reported as 0) or 1 after an uncaught exception.
    """
    if _State.fast_exit_registered:
        return
    atexit.register(_fast_exit)
    if not hasattr(sys.exit, "__wrapped__"):
        sys.exit = _remember_exit(sys.exit)
    _State.fast_exit_registered = True


def status() -> dict:
    """This process's GC settings and what the hooks did (for health endpoints and tests)."""
    freeze_count = gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else None
    return {
        "pid": os.getpid(),
        "gc_enabled": gc.isenabled(),
        "thresholds": list(gc.get_threshold()),
        "frozen_objects": freeze_count,
        "hooks_started": _State.started,
        "is_master": os.getpid() == _State.master_pid,
        "mode": _State.options.mode,
        "collected_before_freeze": _State.collected,
        "freezes": _State.freezes,
        "fast_exit": _State.fast_exit_active,
    }
