"""WSGI app for gunicorn --max-requests 1: each request runs in a short-lived thread of its own
(a thread that ends), and each worker exits after its request, so the master forks a new one."""

import threading


def _work(out):
    out.append(sum(i * i for i in range(20_000)))


def app(environ, start_response):
    out: list = []
    t = threading.Thread(target=_work, args=(out,), name="request-worker")
    t.start()
    t.join()
    body = f"{out[0]}\n".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
