"""A FastAPI service whose async endpoint imports a large module on its first call in each worker
(as applications import heavy dependencies lazily) and then blocks the event loop:

  /block  the first call in a worker imports LAZYAPP_MODULE (compiled from source: the test writes it
          and runs with PYTHONDONTWRITEBYTECODE=1); every call then sleeps LAZYAPP_BLOCK_S in time.sleep
  /fast   answers at once

Run: gunicorn -w 2 -k uvicorn.workers.UvicornWorker lazyapp:app (LAZYAPP_PATH: the module's folder)."""

import importlib
import os
import sys
import time

from fastapi import FastAPI

app = FastAPI()
BLOCK_S = float(os.environ.get("LAZYAPP_BLOCK_S", "0.05"))
MODULE = os.environ.get("LAZYAPP_MODULE", "")
if os.environ.get("LAZYAPP_PATH"):
    sys.path.insert(0, os.environ["LAZYAPP_PATH"])
_loaded = []


@app.get("/block")
async def block():
    if MODULE and not _loaded:
        _loaded.append(importlib.import_module(MODULE))
    time.sleep(BLOCK_S)  # LINE:block
    return {"slept": BLOCK_S}


@app.get("/fast")
async def fast():
    return {"ok": True}
