"""Server time per endpoint: each sample whose stack passes through a web framework's dispatch is
charged to the handler the framework called (the first application frame inside the dispatch
frame), whatever the thread was doing there: holding the GIL, waiting for it, blocked, in native code.

The dispatch frames are the framework's own (function, file) pairs (gilty/load/frameworks.py); a
server without one has its handler found generically, as the first application frame under it.
The handler is the first frame inside the dispatch that is the application's: outside the standard library and site-packages, or in
a package named by ``--app``; failing that (an application installed into site-packages, as httpbin
is in its Docker image) the first frame inside the dispatch that is not the framework's own code, the
standard library's or generated code. Decorators and wrappers of the frameworks are looked through.
Start-up stacks (importing, compiling, making dataclasses) are no endpoint's (gilty/load/startup.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from gilty.load.frameworks import FRAMEWORK_CODE, FRAMEWORK_VIEWS, dispatch, generic_handler
from gilty.load.sites import NO_APP, AppScope, is_library, library_prefixes, package_fragment, site_key
from gilty.load.startup import startup_frame
from gilty.sampling.session import GC, HOLDING_GIL, IDLE, STATE_NAMES, Session

FRAMEWORK = "(framework)"  # inside a dispatch frame but not (yet) in a handler
TOP_ENDPOINTS = 10


def _generated(file: str) -> bool:
    # `<string>` (dataclasses' and namedtuple's generated methods), `<decorator-gen-12>`, `<frozen ...>`;
    # code compiled under a bare name that is no source file (Sanic's touchup names its recompiled
    # methods so: `handle_request`), while a script run by a relative path keeps its `.py`
    return file.startswith("<") or ("/" not in file and not file.endswith(".py"))


def _framework_code(file: str, prefixes: tuple) -> bool:
    if any(view in file for view in FRAMEWORK_VIEWS):
        return False
    stdlib = bool(prefixes) and file.startswith(prefixes) and "site-packages/" not in file
    return stdlib or any(fragment in file for fragment in FRAMEWORK_CODE)


def handler_frame(stack: list, prefixes: tuple, app: AppScope = NO_APP) -> Optional[tuple]:
    """The handler a stack (innermost first) is in: the first application frame inside the innermost
    dispatch frame, else the first frame there that is neither the framework's nor the standard
    library's (an application installed in site-packages); ``FRAMEWORK`` inside a dispatch frame
    without either. Outside any known dispatch, the first application frame under an installed
    server's frame (gilty/load/frameworks.py), else None."""
    found = next(((i, d) for i, f in enumerate(stack) if (d := dispatch(f)) is not None), None)
    if found is None:
        return generic_handler([f for f in reversed(stack) if not _generated(f[1])], prefixes, app)
    at, direct = found
    inner = [f for f in reversed(stack[:at]) if not _generated(f[1])]  # from the dispatch frame inwards
    for frame in inner:
        if not is_library(frame[1], prefixes, app):
            return frame
    if direct:
        for frame in inner:
            if not _framework_code(frame[1], prefixes):
                return frame
    return FRAMEWORK


def handler_app(frame, app: AppScope) -> AppScope:
    """``app`` with the package of a handler found in site-packages added: its own frames are then the
    application's when sites are named (`randint` called from `random_bytes`, not random's internals)."""
    if not isinstance(frame, tuple) or any(fragment in frame[1] for fragment in FRAMEWORK_CODE):
        return app  # an admin view does not make all of Django the application's
    return app.including(package_fragment(frame[1]))


@dataclass
class Endpoint:
    function: str
    file: str
    seconds: dict  # state name -> thread-seconds of samples in this handler
    total_s: float
    share_holding: float  # of total_s: holding the GIL (running Python or collecting)
    top_site: Optional[str] = None  # where it held the GIL most, as the application sees it
    top_site_share: float = 0.0

    @property
    def label(self) -> str:
        return self.function if self.file == "" else f"{self.function} ({os.path.basename(self.file)})"


@dataclass
class _Acc:
    counts: list = field(default_factory=lambda: [0.0] * len(STATE_NAMES))
    sites: dict = field(default_factory=dict)


def _pass_seconds(session: Session) -> float:
    return session.duration_s / session.samples if session.samples else session.period_s


def endpoint_table(sessions: list, app: AppScope = NO_APP) -> list:
    """[Endpoint] over the given sessions, most server time first; idle time of the framework row
    is left out (a pool thread parked in its queue is not serving anyone), and so are start-up
    stacks (a first request importing the views is start-up, not the view's work)."""
    acc: dict = {}
    for s in sessions:
        prefixes = library_prefixes(s)
        seconds = _pass_seconds(s)
        handlers: dict = {}  # stack_id -> handler frame (stacks repeat across threads and states)
        for (_tid, state, stack_id), n in s.stack_counts().items():
            if stack_id not in handlers:
                stack = s.stack(stack_id)
                handlers[stack_id] = None if startup_frame(stack) else handler_frame(stack, prefixes, app)
            frame = handlers[stack_id]
            if frame is None or (frame == FRAMEWORK and state == IDLE):
                continue
            key = ("(framework)", "") if frame == FRAMEWORK else (frame[0], frame[1])
            a = acc.setdefault(key, _Acc())
            code = state if 0 <= state < len(STATE_NAMES) else len(STATE_NAMES) - 1
            a.counts[code] += n * seconds
            if state in (HOLDING_GIL, GC):
                own = handler_app(frame, app)
                function, file, line, caller = site_key(s.stack(stack_id), prefixes, own)
                place = file if is_library(file, prefixes, own) else f"{file}:{line}"
                label = f"{function} ({place})"
                a.sites[label] = a.sites.get(label, 0.0) + n * seconds
    out = []
    for (function, file), a in acc.items():
        total = sum(a.counts)
        if total <= 0:
            continue
        holding = a.counts[HOLDING_GIL] + a.counts[GC]
        top = max(a.sites.items(), key=lambda kv: kv[1], default=None)
        out.append(
            Endpoint(
                function=function,
                file=file,
                seconds={name: a.counts[code] for code, name in enumerate(STATE_NAMES) if a.counts[code] > 0},
                total_s=total,
                share_holding=holding / total,
                top_site=top[0] if top else None,
                top_site_share=top[1] / total if top else 0.0,
            )
        )
    out.sort(key=lambda e: -e.total_s)
    return out[:TOP_ENDPOINTS]


# A thread outside any request that holds the GIL this share of its time competes with the handlers.
BACKGROUND_HOLDING_SHARE = 0.1


@dataclass
class BackgroundThread:
    pid: int
    tid: int
    thread: str
    share_holding: float  # of the thread's samples: holding the GIL outside any handler
    top_site: Optional[str]


def background_threads(sessions: list, skip_tids: set, app: AppScope = NO_APP) -> list:
    """Threads that hold the GIL outside any request handler (a logging or metrics thread), the busiest
    first; ``skip_tids`` ({(pid, tid)}) are left out (event-loop threads, whose callbacks run outside
    handlers by design)."""
    out = []
    for s in sessions:
        prefixes = library_prefixes(s)
        per_tid: dict = {}  # tid -> [samples, holding outside handlers, {site: n}]
        for (tid, state, stack_id), n in s.stack_counts().items():
            if (s.target.pid, tid) in skip_tids:
                continue
            acc = per_tid.setdefault(tid, [0, 0, {}])
            acc[0] += n
            if state not in (HOLDING_GIL, GC):
                continue
            stack = s.stack(stack_id)
            if stack and (handler_frame(stack, prefixes, app) is not None or startup_frame(stack)):
                continue
            acc[1] += n
            if stack:
                function, file, line, _caller = site_key(stack, prefixes, app)
                label = f"{function} ({file if is_library(file, prefixes, app) else f'{file}:{line}'})"
                acc[2][label] = acc[2].get(label, 0) + n
        for tid, (total, holding, sites) in per_tid.items():
            if total and holding / total >= BACKGROUND_HOLDING_SHARE:
                top = max(sites.items(), key=lambda kv: kv[1])[0] if sites else None
                out.append(BackgroundThread(s.target.pid, tid, s.thread_name(tid), holding / total, top))
    out.sort(key=lambda b: -b.share_holding)
    return out
