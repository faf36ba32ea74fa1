"""Where servers call the application: the dispatch frames of web frameworks, RPC servers and task
queues, the packages that are their own machinery, and the generic rule for servers without a rule.

A dispatch frame is named by the last component of its function's name (3.10 frames carry bare names,
3.11+ qualified ones) and a fragment of its file's path. ``direct`` says the frame calls the handler
itself (a view, a responder, an RPC method, a task's function), so its callee is the handler wherever
the callee's file lives; otherwise (a whole WSGI/ASGI application or any function, as gunicorn's
handle_request and AnyIO's worker thread call) only an application frame inside it is.

Names were read from the frameworks' releases the tests install (tests/integration/test_frameworks.py).
"""

from __future__ import annotations

from typing import Optional

from gilty.load.sites import NO_APP, AppScope, is_library

# (last component of the function's name, a path fragment of its file, calls the handler itself)
DISPATCH_FRAMES = (
    ("run_endpoint_function", "fastapi/routing.py", True),  # FastAPI, async endpoints (sync ones: below)
    ("run", "anyio/_backends/_asyncio.py", False),  # a sync endpoint in AnyIO's worker thread (FastAPI/Starlette)
    ("app", "starlette/routing.py", True),  # Starlette's request_response
    ("dispatch_request", "flask/", True),  # Flask views
    ("full_dispatch_request", "flask/", False),  # Flask, when dispatch_request is not seen
    ("_get_response", "django/core/handlers/base.py", True),  # Django views under WSGI
    ("_get_response_async", "django/core/handlers/base.py", True),  # Django views under ASGI
    ("thread_handler", "asgiref/sync.py", False),  # a sync view run by sync_to_async in asgiref's thread
    ("_handle", "aiohttp/web_app.py", True),  # aiohttp.web: Application._handle awaits the handler
    ("_execute", "tornado/web.py", True),  # Tornado: RequestHandler._execute calls get/post/...
    ("handle_request", "sanic/app.py", True),  # Sanic
    ("handle_request", "handle_request", True),  # Sanic's touchup recompiles it under its name for a file
    ("dispatch_request", "quart/app.py", True),  # Quart views
    ("_call_handler_function", "litestar/routes/http.py", True),  # Litestar route handlers
    ("__call__", "falcon/app.py", True),  # Falcon (WSGI) responders
    ("__call__", "falcon/asgi/app.py", True),  # Falcon (ASGI) responders
    ("_call_behavior", "grpc/_server.py", True),  # gRPC's Python server: the servicer's method
    ("trace_task", "celery/app/trace.py", True),  # a Celery task: the task's function is the endpoint
    ("handle_request", "gunicorn/workers/", False),  # any WSGI app under gunicorn's sync/gthread workers
    ("handle_one_request", "http/server.py", True),  # the standard library's BaseHTTPRequestHandler.do_*
    ("run", "wsgiref/handlers.py", False),  # any WSGI app under the standard library's wsgiref
)
# Packages whose own frames are the framework's machinery between the dispatch and the handler
# (routing, decorators, sync/async adapters, protocol code); Django's contrib apps (the admin) have
# views of their own.
FRAMEWORK_CODE = (
    "flask/",
    "werkzeug/",
    "django/",
    "starlette/",
    "fastapi/",
    "anyio/",
    "asgiref/",
    "sniffio/",
    "gunicorn/",
    "uvicorn/",
    "h11/",
    "httptools/",
    "pydantic/",
    "pydantic_core/",
    "decorator.py",
    "itsdangerous/",
    "markupsafe/",
    "jinja2/",
    "blinker/",
    "sqlparse/",
    "aiohttp/",
    "multidict/",
    "yarl/",
    "tornado/",
    "sanic/",
    "sanic_routing/",
    "quart/",
    "hypercorn/",
    "litestar/",
    "msgspec/",
    "falcon/",
    "grpc/",
    "celery/",
    "kombu/",
    "billiard/",
    "vine/",
)
FRAMEWORK_VIEWS = ("django/contrib/",)


def dispatch(frame: tuple) -> Optional[bool]:
    """None when ``frame`` is no dispatch frame, else whether it calls the handler itself."""
    function, file, _line = frame
    last = function.rsplit(".", 1)[-1]
    return next((direct for name, fragment, direct in DISPATCH_FRAMES if last == name and fragment in file), None)


def server_frame(file: str, app: AppScope = NO_APP) -> bool:
    """A frame of an installed server or framework: site-packages, or a console script pip wrote
    (`.venv/bin/celery`); not the standard library (asyncio, threading and runpy run any program)."""
    if app.holds(file):
        return False
    console_script = "/bin/" in file and not file.endswith(".py")
    return "site-packages/" in file or "dist-packages/" in file or console_script


# Standard-library code where a program starts work of its own (an event loop running a task, a
# thread, a pool's work item): what runs inside was not called by the server's frames outside it.
STARTS_WORK = ("/asyncio/", "/threading.py", "/concurrent/futures/")


def generic_handler(frames: list, prefixes: tuple, app: AppScope = NO_APP) -> Optional[tuple]:
    """Where no dispatch frame is known: the first application frame under an installed server's or
    framework's frame, ``frames`` outermost first (generated code left out), looking through the
    standard library between them; None when the stack never leaves the server (waiting for work) or
    never enters one since it last started work (the application's own threads and asyncio tasks)."""
    served = False
    for frame in frames:
        file = frame[1]
        if server_frame(file, app):
            served = True
        elif not is_library(file, prefixes, app):
            if served:
                return frame
        elif any(fragment in file for fragment in STARTS_WORK):
            served = False
    return None
