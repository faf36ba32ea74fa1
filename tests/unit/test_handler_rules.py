"""The handler under each server's dispatch, on stacks shaped as the frameworks' releases make them
(issue 31, item 6): aiohttp's dispatch was not recognised, so an aiohttp server had no endpoint table
and no task endpoints. Where no rule exists, the handler is found generically: the first application
frame under an installed server's frame. The real servers are in tests/integration/test_frameworks.py."""

from __future__ import annotations

from gilty.load.endpoints import FRAMEWORK, handler_frame
from gilty.load.sites import AppScope

SITE = "/venv/lib/python3.12/site-packages"
STDLIB = "/usr/lib/python3.12"
PREFIXES = (f"{STDLIB}/",)
VIEW = ("view", "/srv/app/server.py", 12)
INNER = ("quote", f"{STDLIB}/urllib/parse.py", 893)  # a library call inside the handler
LOOP = [
    ("Handle._run", f"{STDLIB}/asyncio/events.py", 84),
    ("BaseEventLoop._run_once", f"{STDLIB}/asyncio/base_events.py", 1936),
    ("BaseEventLoop.run_forever", f"{STDLIB}/asyncio/base_events.py", 608),
]
THREAD = [
    ("Thread.run", f"{STDLIB}/threading.py", 1010),
    ("Thread._bootstrap_inner", f"{STDLIB}/threading.py", 1073),
    ("Thread._bootstrap", f"{STDLIB}/threading.py", 1030),
]
MAIN = ("<module>", "/srv/app/server.py", 40)

# framework -> the frames between the handler and the event loop or thread (innermost first)
FRAMEWORKS = {
    "aiohttp": [
        ("Application._handle", f"{SITE}/aiohttp/web_app.py", 569),
        ("RequestHandler._handle_request", f"{SITE}/aiohttp/web_protocol.py", 510),
        ("RequestHandler.start", f"{SITE}/aiohttp/web_protocol.py", 620),
        *LOOP,
        ("run_app", f"{SITE}/aiohttp/web.py", 530),
        MAIN,
    ],
    "tornado": [
        ("RequestHandler._execute", f"{SITE}/tornado/web.py", 1990),
        *LOOP,
        ("IOLoop.start", f"{SITE}/tornado/platform/asyncio.py", 211),
        MAIN,
    ],
    "sanic": [
        ("Sanic.handle_request", f"{SITE}/sanic/app.py", 1373),
        ("HttpProtocol.connection_task", f"{SITE}/sanic/server/protocols/http_protocol.py", 155),
        *LOOP,
    ],
    # Sanic's touchup recompiles these methods with their name for a file (sanic/touchup/schemes/base.py)
    "sanic touched up": [
        ("Sanic.handle_request", "handle_request", 1291),
        ("HttpProtocol.connection_task", "connection_task", 155),
        *LOOP,
    ],
    "quart": [
        ("Quart.dispatch_request", f"{SITE}/quart/app.py", 1601),
        ("Quart.full_dispatch_request", f"{SITE}/quart/app.py", 1500),
        *LOOP,
    ],
    "litestar": [
        ("HTTPRoute._call_handler_function", f"{SITE}/litestar/routes/http.py", 181),
        ("HTTPRoute._get_response_for_request", f"{SITE}/litestar/routes/http.py", 120),
        *LOOP,
    ],
    "falcon": [
        ("App.__call__", f"{SITE}/falcon/app.py", 487),
        ("ServerHandler.run", f"{STDLIB}/wsgiref/handlers.py", 137),
        *THREAD,
    ],
    "falcon asgi": [("App.__call__", f"{SITE}/falcon/asgi/app.py", 585), *LOOP],
    "django async": [("BaseHandler._get_response_async", f"{SITE}/django/core/handlers/base.py", 253), *LOOP],
    "django sync view under asgi": [
        ("SyncToAsync.thread_handler", f"{SITE}/asgiref/sync.py", 522),
        ("_WorkItem.run", f"{STDLIB}/concurrent/futures/thread.py", 58),
        *THREAD,
    ],
    "grpc": [
        ("_call_behavior", f"{SITE}/grpc/_server.py", 608),
        ("_unary_response_in_pool", f"{SITE}/grpc/_server.py", 788),
        ("_WorkItem.run", f"{STDLIB}/concurrent/futures/thread.py", 58),
        *THREAD,
    ],
    "celery": [
        ("build_tracer.<locals>.trace_task", f"{SITE}/celery/app/trace.py", 564),
        ("fast_trace_task", f"{SITE}/celery/app/trace.py", 779),
        ("Worker.workloop", f"{SITE}/billiard/pool.py", 362),
    ],
    "wsgiref": [("ServerHandler.run", f"{STDLIB}/wsgiref/handlers.py", 137), *THREAD],
}


def test_handler_under_each_framework():
    for name, outer in FRAMEWORKS.items():
        assert handler_frame([INNER, VIEW, *outer], PREFIXES) == VIEW, name
    # inside the dispatch, before the handler: the framework's row, as for the frameworks known before
    assert handler_frame(FRAMEWORKS["aiohttp"], PREFIXES) == FRAMEWORK


def test_a_suspended_aiohttp_task_is_charged_to_its_handler():
    # a task's coroutine chain (what `--tasks` reads): awaiting a semaphore inside the handler
    chain = [("Semaphore.acquire", f"{STDLIB}/asyncio/locks.py", 386), VIEW, *FRAMEWORKS["aiohttp"][:3]]
    assert handler_frame(chain, PREFIXES) == VIEW


def test_generic_handler_under_a_server_without_a_rule():
    served = [("Server._serve_one", f"{SITE}/acme_web/server.py", 88), ("Server.serve_forever", f"{SITE}/acme_web/server.py", 40)]
    # the first application frame under the server's frames, looking through the standard library
    assert handler_frame([INNER, VIEW, *served, *LOOP, MAIN], PREFIXES) == VIEW
    assert (
        handler_frame([INNER, VIEW, ("ContextDecorator.inner", f"{STDLIB}/contextlib.py", 81), *served, *THREAD], PREFIXES)
        == VIEW
    )
    # a server's pool thread: started by the standard library, then the server's frames call the handler
    pool = [("_WorkItem.run", f"{STDLIB}/concurrent/futures/thread.py", 58), *THREAD]
    assert handler_frame([INNER, VIEW, *served, *pool], PREFIXES) == VIEW
    # a server started by a console script (no .py): the script is the server's, not the application
    assert handler_frame([VIEW, *served, ("<module>", "/venv/bin/acme-serve", 8)], PREFIXES) == VIEW
    # a callback from a library the handler called is the handler's, not a handler of its own
    validator = ("check_price", "/srv/app/models.py", 30)
    assert handler_frame([validator, ("BaseModel.__init__", f"{SITE}/pydantic/main.py", 200), VIEW, *served], PREFIXES) == VIEW


def test_no_handler_where_the_stack_never_reaches_the_application():
    # the server waiting for work: its loop at the selector, under the application's own main
    select = ("EpollSelector.select", f"{STDLIB}/selectors.py", 468)
    assert handler_frame([select, *LOOP, ("run_app", f"{SITE}/aiohttp/web.py", 530), MAIN], PREFIXES) is None
    # the application's own thread (a metrics flusher) never passes through a server
    assert handler_frame([INNER, ("flush_metrics", "/srv/app/metrics.py", 9), *THREAD], PREFIXES) is None
    # the application's own asyncio task, run by the loop of a server without a rule: no request's
    run_app = [("run_app", f"{SITE}/acme_web/app.py", 530), MAIN]
    assert handler_frame([INNER, ("refresh_cache", "/srv/app/cache.py", 20), *LOOP, *run_app], PREFIXES) is None
    # a pool thread parked in its queue
    parked = [
        ("Condition.wait", f"{STDLIB}/threading.py", 355),
        ("_worker", f"{STDLIB}/concurrent/futures/thread.py", 89),
        *THREAD,
    ]
    assert handler_frame(parked, PREFIXES) is None


def test_a_blocked_aiohttp_handler_waits_on_a_dependency_not_for_work():
    # The server: a synchronous `requests` call inside an async handler blocks the loop in
    # recvfrom. Outside any known dispatch that read as the loop "waiting for work".
    from gilty.load.kinds import DEPENDENCY_WAIT, WAITING_FOR_WORK, classify
    from synthetic import EPOLL_WAIT, IDLE, RECVFROM, BatchBuilder, make_session

    b = BatchBuilder(names={1: "MainThread"})
    blocked = b.stack(
        ("SocketIO.readinto", f"{STDLIB}/socket.py", 706),
        ("Session.get", f"{SITE}/requests/sessions.py", 602),
        ("fetch_price", "/srv/app/server.py", 10),
        *FRAMEWORKS["aiohttp"],
    )
    select = b.stack(
        ("EpollSelector.select", f"{STDLIB}/selectors.py", 468), *LOOP, ("run_app", f"{SITE}/aiohttp/web.py", 530), MAIN
    )
    session = make_session([b.batch([{1: (IDLE, blocked, RECVFROM)}, {1: (IDLE, select, EPOLL_WAIT)}])])
    cache: dict = {}
    assert classify(session, IDLE, blocked, RECVFROM, PREFIXES, AppScope(), cache) == DEPENDENCY_WAIT
    assert classify(session, IDLE, select, EPOLL_WAIT, PREFIXES, AppScope(), cache) == WAITING_FOR_WORK
