"""aiohttp.web: the handler waits for a semaphore's slot (the issue's app capped its throughput so)."""

import asyncio
import os

from aiohttp import web

from common import work

SLOTS = None
SLOT_S = float(os.environ.get("AIOHTTP_SLOT_MS", "10")) / 1000  # each request holds one of 2 slots this long


async def aiohttp_view(request):
    global SLOTS
    SLOTS = SLOTS or asyncio.Semaphore(2)
    async with SLOTS:  # LINE:acquire
        await asyncio.sleep(SLOT_S)  # LINE:sleep
    return web.Response(text=work())


def serve(port: int) -> None:
    app = web.Application()
    app.router.add_get("/", aiohttp_view)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
