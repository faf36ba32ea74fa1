"""What a server thread's sample means for the load, beyond its GIL state: waiting for work (no
request to serve), waiting on a dependency inside a request, or start-up.

Waiting for work is a thread outside any request handler blocked where servers wait for the next
request: `accept`, a `select`/`poll`/`epoll` on the listening socket (gunicorn's sync worker, the
arbiter), an event loop at its selector with nothing ready, an idle pool thread's queue `get` (a
futex), or the framework reading the next request of a keep-alive connection. It is never a
dependency wait: only a handler's own I/O is. A thread that is not running Python and has no
request is not what limits the server. A thread with no Python frame blocked in such a wait (uWSGI's
master, its `--http` router and its workers between requests, any accept loop written in C) waits for
work too: no request of the application is in progress on it.
"""

from __future__ import annotations

from gilty.load.endpoints import FRAMEWORK, handler_frame
from gilty.load.sites import AppScope
from gilty.load.startup import startup_frame
from gilty.sampling.analysis.syscalls import IO_WAIT, LOCK_WAIT, SELECT_WAIT, idle_kind
from gilty.sampling.session import IDLE, NO_STACK, STATE_NAMES

WAITING_FOR_WORK = "waiting for work"
DEPENDENCY_WAIT = "I/O wait in a request"  # a handler blocked on a socket or file: a dependency, a slow client
STARTUP = "start-up"
_WORK_WAITS = (IO_WAIT, SELECT_WAIT, LOCK_WAIT)


def classify(session, state: int, stack_id: int, syscall: int, prefixes: tuple, app: AppScope, cache: dict) -> str:
    """The category of one sample: STARTUP, WAITING_FOR_WORK, DEPENDENCY_WAIT, an idle kind
    ("sleep", "lock wait", ...) for other idle samples, else its state's name."""
    key = (state, stack_id, syscall if state == IDLE else -1)
    hit = cache.get(key)
    if hit is not None:
        return hit
    stack = session.stack(stack_id) if stack_id != NO_STACK else []
    if stack and startup_frame(stack):
        out = STARTUP
    elif state != IDLE:
        out = STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else "unknown"
    else:
        name = session.syscall_label(syscall)
        kind = idle_kind(name)
        handler = handler_frame(stack, prefixes, app) if stack else None
        in_handler = handler is not None and handler != FRAMEWORK
        if not in_handler and (kind in _WORK_WAITS or name.startswith("accept")):
            out = WAITING_FOR_WORK
        elif in_handler and kind in (IO_WAIT, SELECT_WAIT):
            out = DEPENDENCY_WAIT
        else:
            out = kind
    cache[key] = out
    return out
