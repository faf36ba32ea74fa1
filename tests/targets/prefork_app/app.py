"""A WSGI app for prefork memory tests: builds a large heap of Python objects at import.

Served by ``gunicorn --preload app:app``, the heap is built once in the master and shared with
every worker until a worker writes to it. ``PREFORK_APP_RECORDS`` sets its size (default
180000 records, about 160 MiB of RSS).

Endpoints (each answers JSON with the worker's pid):

- ``/``            liveness
- ``/collect``     a full ``gc.collect()`` in this worker (``?once=1``: only the first time)
- ``/touch``       reads every field of every record: reference-count writes on every object
                   (``?once=1``: only the first time)
- ``/gc``          this process's GC settings (``gilty.memory.prefork.status()`` when importable)
"""

import gc
import json
import os
import time

RECORDS = int(os.environ.get("PREFORK_APP_RECORDS", "180000"))


def _build(n):
    # Dicts, lists, strings, floats and ints: tracked containers (what GC traverses) and untracked
    # leaves (what only reference counting writes to).
    data = []
    for i in range(n):
        data.append(
            {
                "id": i,
                "name": "user-%d" % i,
                "email": "user%d@example.invalid" % i,
                "tags": ["t%d" % (i % 97), "g%d" % (i % 13), "x"],
                "score": i * 0.5,
                "history": [i, i + 1, i + 2],
            }
        )
    return data


_t0 = time.monotonic()
DATA = _build(RECORDS)
# One collection now: the heap is then all in the oldest generation with nothing pending, so a
# worker's first full collection happens when the test asks for it (3.13 can otherwise start one
# under light traffic, depending on inherited counters).
gc.collect()
BUILD_S = time.monotonic() - _t0

_done = {"collect": None, "touch": None}


def _collect():
    t = time.perf_counter()
    found = gc.collect()
    return {"collected": found, "seconds": time.perf_counter() - t}


def _touch():
    t = time.perf_counter()
    total = 0
    for rec in DATA:
        for key, value in rec.items():
            if isinstance(value, list):
                for item in value:
                    total += 1 if item else 0
            else:
                total += 1 if value else 0
    return {"fields": total, "seconds": time.perf_counter() - t}


def _gc_status():
    try:
        from gilty.memory import prefork

        return prefork.status()
    except ImportError:
        return {
            "pid": os.getpid(),
            "gc_enabled": gc.isenabled(),
            "thresholds": list(gc.get_threshold()),
            "frozen_objects": gc.get_freeze_count(),
        }


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    once = "once=1" in environ.get("QUERY_STRING", "")
    body = {"pid": os.getpid()}
    if path in ("/collect", "/touch"):
        action = path[1:]
        if once and _done[action] is not None:
            body.update(_done[action], first=False)
        else:
            result = _collect() if action == "collect" else _touch()
            _done[action] = result
            body.update(result, first=True)
    elif path == "/gc":
        body.update(_gc_status())
    elif path != "/":
        start_response("404 Not Found", [("Content-Type", "application/json")])
        return [json.dumps({"error": "no such endpoint", "pid": os.getpid()}).encode()]
    else:
        body.update(records=len(DATA), build_s=BUILD_S)
    payload = json.dumps(body).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]
