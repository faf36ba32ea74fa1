"""The web demo service: a FastAPI app with the three problems of the high-performance FastAPI story.

* ``/price`` is ``async`` but calls a blocking "pricing API" (``time.sleep(0.02)``): while it sleeps
  the event loop serves nobody;
* ``/search`` builds result URLs with ``urllib.parse.quote`` in pure Python: CPU in Python, on AnyIO's
  worker threads (a sync endpoint);
* an ``audit-logger`` thread formats log records in a loop, holding the GIL the handlers need;
* ``/health`` answers at once.

Run by ``python -m gilty.demo.web`` under uvicorn: ``uvicorn gilty.demo.web_service:app``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.parse

from fastapi import FastAPI

app = FastAPI()
TERMS = [f"term {i}/with spaces & symbols?" for i in range(40)]


def call_pricing_api() -> float:
    time.sleep(0.02)  # a blocking client call inside an async endpoint
    return 9.99


@app.get("/price")
async def price():
    return {"price": call_pricing_api()}


def build_result_urls(n: int) -> list:
    return ["/".join(urllib.parse.quote(t) for t in TERMS) for _ in range(n)]


@app.get("/search")
def search():
    return {"results": len(build_result_urls(30))}


@app.get("/health")
async def health():
    return {"ok": True}


def audit_log_forever() -> None:
    logger = logging.getLogger("demo.audit")
    handler = logging.StreamHandler(open(os.devnull, "w"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(threadName)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    n = 0
    busy_since = time.perf_counter()
    while True:
        n += 1
        logger.info("audit %d %s", n, {"user": n % 97, "items": list(range(30))})
        # It does let go now and then, like a real one: 1.5 ms of records, then a 2 ms sleep, by the
        # clock rather than a count of records, so it holds the GIL alike on a fast or a slow machine.
        if time.perf_counter() - busy_since >= 0.0015:
            time.sleep(0.002)
            busy_since = time.perf_counter()


threading.Thread(target=audit_log_forever, name="audit-logger", daemon=True).start()
