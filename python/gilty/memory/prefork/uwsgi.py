"""uWSGI: keep the heap the master loads shared with its workers.

uWSGI loads the application in the master (unless ``lazy-apps``) and then forks the workers.
Import this module first in the WSGI file and call ``freeze()`` at its end::

    import gilty.memory.prefork.uwsgi as gilty_hooks   # first line: stops automatic GC in the master

    import django  # ... the application's imports and set-up
    application = ...

    gilty_hooks.freeze()                        # last line: collect once, then gc.freeze()

Each worker gets automatic collection back through uWSGI's ``post_fork_hook`` (or, outside
uWSGI, ``os.register_at_fork``). With ``lazy-apps = true`` each worker imports the application
itself: there is nothing to share and these hooks change nothing. Options: the same
``GILTY_PREFORK_*`` environment variables as the gunicorn module (docs/prefork.md).
"""

from __future__ import annotations

import os
from typing import Optional

from gilty.memory import prefork as _prefork
from gilty.memory.prefork import PreforkOptions

_prefork.master_start(_prefork.options_from_env())


def _install_child_hook() -> str:
    try:
        import uwsgi  # type: ignore[import-not-found]  # only inside a uWSGI process
    except ImportError:
        uwsgi = None
    if uwsgi is not None:
        previous = getattr(uwsgi, "post_fork_hook", None)

        def post_fork_hook() -> None:
            _prefork.after_fork_in_child()
            if callable(previous):
                previous()

        uwsgi.post_fork_hook = post_fork_hook
        return "uwsgi.post_fork_hook"
    os.register_at_fork(after_in_child=_prefork.after_fork_in_child)
    return "os.register_at_fork"


CHILD_HOOK = _install_child_hook()


def configure(options: PreforkOptions) -> None:
    """Replace the options read from the environment."""
    _prefork.master_start(options)


def freeze(options: Optional[PreforkOptions] = None) -> None:
    """Call at the end of the WSGI file: collect once and freeze everything loaded so far."""
    if options is not None:
        configure(options)
    _prefork.before_fork()
