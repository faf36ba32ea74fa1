"""WSGI app for gunicorn in prometheus_client multiprocess mode: every worker runs two spinning
threads (each holds the GIL about half the time) and exports gilty's figures; /metrics merges all
workers' files; /gc runs a full collection in the worker that answers."""

import gc
import threading

import prometheus_client
from prometheus_client import multiprocess


def _spin():
    while True:
        pass


def start_spinners():
    for i in range(2):
        threading.Thread(target=_spin, name=f"spinner-{i}", daemon=True).start()


def app(environ, start_response):
    if environ["PATH_INFO"] == "/gc":
        gc.collect()
        body = b"collected\n"
    else:
        registry = prometheus_client.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        body = prometheus_client.generate_latest(registry)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
