"""A tiny server for gunicorn: `serverapp:wsgi` (sync workers) and `serverapp:api` (FastAPI on
uvicorn workers). Every request spends ~20 ms of CPU in busy_handler(), so workers are busy."""

import time


def busy_handler():
    end = time.perf_counter() + 0.02
    n = 0
    while time.perf_counter() < end:
        n += 1  # LINE:busy_handler
    return n


def wsgi(environ, start_response):
    body = str(busy_handler()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


try:
    from fastapi import FastAPI
except ImportError:  # the sync-worker test does not need it
    api = None
else:
    api = FastAPI()

    @api.get("/")
    def root():  # a sync endpoint: runs in an "AnyIO worker thread"
        return {"n": busy_handler()}
