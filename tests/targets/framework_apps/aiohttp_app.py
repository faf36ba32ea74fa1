"""aiohttp.web: the handler waits for a semaphore's slot (the issue's app capped its throughput so)."""

import asyncio

from aiohttp import web

from common import work

SLOTS = None


async def aiohttp_view(request):
    global SLOTS
    SLOTS = SLOTS or asyncio.Semaphore(2)
    async with SLOTS:  # LINE:acquire
        await asyncio.sleep(0.01)  # LINE:sleep
    return web.Response(text=work())


def serve(port: int) -> None:
    app = web.Application()
    app.router.add_get("/", aiohttp_view)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
