"""N pending asyncio tasks (default 10,000), each two coroutines deep awaiting an Event; prints "ready"."""

import asyncio
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000


async def inner(event):
    await event.wait()


async def outer(event):
    await inner(event)


async def main():
    event = asyncio.Event()
    tasks = [asyncio.create_task(outer(event)) for _ in range(N)]
    await asyncio.sleep(0.2)
    print("ready", flush=True)
    await asyncio.gather(*tasks)


asyncio.run(main())
