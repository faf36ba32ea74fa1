"""A FastAPI service with the problems of the high-performance FastAPI story, one per route:

  /block  an async endpoint that calls the blocking time.sleep(0.02): the event loop stops meanwhile
  /urls   CPU-bound URL building with urllib.parse.quote (a sync endpoint: runs in AnyIO's threads)
  /fast   an async endpoint that answers at once
and, with WEBAPP_LOGGER=1, a logging thread that formats records in pure Python in a loop, fighting
the request handlers for the GIL.

Run: uvicorn webapp:app --port PORT (or gunicorn -k uvicorn.workers.UvicornWorker webapp:app)."""

import logging
import os
import threading
import time
import urllib.parse

from fastapi import FastAPI

app = FastAPI()
PARTS = [f"segment {i}/with spaces & symbols?" for i in range(40)]
BLOCK_S = float(os.environ.get("WEBAPP_BLOCK_S", "0.02"))
URL_CALLS = int(os.environ.get("WEBAPP_URL_CALLS", "10"))


def build_url(n):
    out = []
    for _ in range(n):
        out.append("/".join(urllib.parse.quote(p) for p in PARTS))  # LINE:build_url
    return out


@app.get("/block")
async def block():
    time.sleep(BLOCK_S)  # LINE:block
    return {"slept": BLOCK_S}


@app.get("/urls")
def urls():
    return {"n": len(build_url(URL_CALLS))}


@app.get("/fast")
async def fast():
    return {"ok": True}


def log_forever():
    logger = logging.getLogger("webapp.audit")
    handler = logging.StreamHandler(open(os.devnull, "w"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    n = 0
    while True:
        n += 1
        logger.info("audit record %d: %s", n, {"user": n % 97, "path": "/urls", "items": list(range(20))})


if os.environ.get("WEBAPP_LOGGER") == "1":
    threading.Thread(target=log_forever, name="audit-logger", daemon=True).start()
