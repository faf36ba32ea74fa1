"""An aiohttp server with two mistakes a real one makes (issue 31): ``/price`` makes a synchronous
`requests` call from its async handler, blocking the event loop for the length of the upstream's
answer; ``/quote`` awaits an ``asyncio.Semaphore(2)``, so at most two requests are served at once.

Usage: aiohttp_blocking_app.py PORT UPSTREAM_URL. Prints "ready" once it listens on 127.0.0.1:PORT.
``/price?s=SECONDS`` passes its query on to the upstream (the test's slow server answers after SECONDS).
"""

import asyncio
import sys

import requests
from aiohttp import web

UPSTREAM = sys.argv[2]
limit = None


async def fetch_price(request):
    price = requests.get(f"{UPSTREAM}?{request.query_string}", timeout=60).text  # blocks the loop # LINE:blocking
    return web.Response(text=price)


async def quote(request):
    async with limit:  # two at a time # LINE:acquire
        await asyncio.sleep(0.05)
    return web.Response(text="quote")


async def main() -> None:
    global limit
    limit = asyncio.Semaphore(2)
    app = web.Application()
    app.add_routes([web.get("/price", fetch_price), web.get("/quote", quote)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(sys.argv[1])).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
