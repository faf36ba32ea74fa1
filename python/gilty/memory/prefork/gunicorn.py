"""gunicorn hooks that keep a ``--preload``-ed heap shared between the master and its workers.

As a config module, nothing else needed::

    gunicorn --preload -c python:gilty.memory.prefork.gunicorn app:app

From an existing config file (``gunicorn.conf.py``)::

    from gilty.memory.prefork.gunicorn import pre_fork, post_fork   # importing stops GC in the master

or, when the config already has a ``pre_fork`` / ``post_fork``, call these from yours::

    import gilty.memory.prefork.gunicorn as gilty_hooks

    def post_fork(server, worker):
        gilty_hooks.post_fork(server, worker)
        ...

gunicorn reads its config before it preloads the application, so importing this module stops
automatic collection early enough. Options come from the environment (``GILTY_PREFORK_GC=disable``
or ``threshold0``, ``GILTY_PREFORK_FAST_EXIT=1``, ``GILTY_PREFORK_COLLECT=0``; see
docs/prefork.md), or call ``configure(PreforkOptions(...))`` in a config file before the hooks run.
"""

from __future__ import annotations

from typing import Any

from gilty.memory import prefork as _prefork
from gilty.memory.prefork import PreforkOptions

_prefork.master_start(_prefork.options_from_env())
_warned_no_preload = False


def configure(options: PreforkOptions) -> None:
    """Replace the options read from the environment (call from a config file)."""
    _prefork.master_start(options)


def pre_fork(server: Any, worker: Any) -> None:
    """gunicorn hook, in the master before each fork: collect once, then ``gc.freeze()``."""
    global _warned_no_preload
    first = _prefork._State.freezes == 0
    _prefork.before_fork()
    log = getattr(server, "log", None)
    if log is None:
        return
    cfg = getattr(server, "cfg", None)
    if cfg is not None and not getattr(cfg, "preload_app", True) and not _warned_no_preload:
        _warned_no_preload = True
        log.warning("gilty.prefork: --preload is off: each worker imports the app itself, so there is no heap to share")
    if first:
        s = _prefork.status()
        log.info(
            "gilty.prefork: froze %s objects before forking (collected %s first; GC mode %s)",
            s["frozen_objects"],
            s["collected_before_freeze"],
            s["mode"],
        )


def post_fork(server: Any, worker: Any) -> None:
    """gunicorn hook, in each worker right after the fork: automatic collection back on."""
    _prefork.after_fork_in_child()
