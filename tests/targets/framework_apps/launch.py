"""Several framework apps at once, each in a server process of its own, behind one front server:

    python launch.py FRONT_PORT NAME=PORT [NAME=PORT ...]

NAME is one of SERVERS. The front (the standard library's HTTP server, in this process) listens only
once every app answers, so that a load generator waiting for it finds them all up; it also turns
`GET /celery` into a Celery task and `GET /grpc` into a gRPC call, which have no HTTP of their own."""

import socket
import subprocess
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

HERE = Path(__file__).resolve().parent
START_TIMEOUT_S = 60


def _uvicorn(module: str, attr: str = "app"):
    def run(port: int) -> None:
        import importlib

        import uvicorn

        app = getattr(importlib.import_module(module), attr)
        uvicorn.run(app() if attr != "app" else app, host="127.0.0.1", port=port,
                    log_level="warning", loop="asyncio", access_log=False)
    return run


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class _QuietServer(WSGIServer):
    def handle_error(self, request, client_address):
        pass  # a client gone at the end of a run is no error of the app's


class _QuietFront(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


def _wsgiref(module: str, attr: str = "app"):
    def run(port: int) -> None:
        import importlib

        app = getattr(importlib.import_module(module), attr)
        app = app() if attr != "app" else app
        # one thread serves them all: a thread per request lives for a few ms, too short to be sampled much
        make_server("127.0.0.1", port, app, server_class=_QuietServer, handler_class=_QuietHandler).serve_forever()
    return run


def _own(module: str):
    def run(port: int) -> None:
        import importlib

        importlib.import_module(module).serve(port)
    return run


SERVERS = {
    "aiohttp": _own("aiohttp_app"),
    "tornado": _own("tornado_app"),
    "sanic": _own("sanic_app"),
    "grpc": _own("grpc_app"),
    "hypercorn": _own("generic_app"),  # no rule: the generic one
    "quart": _uvicorn("quart_app"),
    "litestar": _uvicorn("litestar_app"),
    "starlette": _uvicorn("starlette_app"),
    "fastapi": _uvicorn("fastapi_app"),
    "django-async": _uvicorn("django_app", "asgi"),
    "falcon-asgi": _uvicorn("falcon_asgi_app"),
    "flask": _wsgiref("flask_app"),
    "falcon": _wsgiref("falcon_app"),
    "django": _wsgiref("django_app", "wsgi"),
    "celery": None,  # its own worker command
}


def _start(name: str, port: int) -> subprocess.Popen:
    if name == "celery":
        argv = [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "-P", "prefork", "-c", "1",
                "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "warning"]
    else:
        argv = [sys.executable, str(HERE / "launch.py"), "serve", name, str(port)]
    return subprocess.Popen(argv, cwd=HERE)


def _answers(name: str, port: int) -> bool:
    if name == "celery":
        import celery_app

        return (celery_app.FOLDER / "ready").exists()
    if name == "grpc":
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
        return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _front(port: int, ports: dict) -> None:
    class Front(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/celery":
                import celery_app

                celery_app.celery_job.delay()
                body = b"queued\n"
            elif self.path == "/grpc":
                import grpc_app

                body = grpc_app.call(ports["grpc"])
            else:
                body = b"ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    _QuietFront(("127.0.0.1", port), Front).serve_forever()


def main() -> None:
    sys.path.insert(0, str(HERE))
    if sys.argv[1] == "serve":
        SERVERS[sys.argv[2]](int(sys.argv[3]))
        return
    front = int(sys.argv[1])
    ports = {name: int(port) for name, port in (arg.split("=") for arg in sys.argv[2:])}
    if "celery" in ports:
        import celery_app

        (celery_app.FOLDER / "ready").unlink(missing_ok=True)
    children = {name: _start(name, port) for name, port in ports.items()}
    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = dict(ports)
    while waiting:
        for name, child in children.items():
            if child.poll() is not None:
                sys.exit(f"launch: {name} exited with status {child.returncode}")
        waiting = {name: port for name, port in waiting.items() if not _answers(name, port)}
        if time.monotonic() > deadline:
            sys.exit(f"launch: no answer from {', '.join(waiting)} within {START_TIMEOUT_S} s")
        time.sleep(0.1)
    _front(front, ports)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # how gilty stops the server's process group: no traceback
        pass
