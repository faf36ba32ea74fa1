"""N asyncio tasks (default 1,000): most parked two coroutines deep on an Event, BUSY of them (default
100) looping over a little Python work and `await asyncio.sleep(0)`. Every 0.1 s it writes
"STEPS MONOTONIC" to COUNT_FILE (the busy tasks' loop iterations so far); prints "ready"."""

import asyncio
import sys
import time

COUNT_FILE = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
BUSY = int(sys.argv[3]) if len(sys.argv) > 3 else 100
steps = 0


async def inner(event):
    await event.wait()


async def parked(event):
    await inner(event)


async def busy():
    global steps
    while True:
        sum(range(300))
        steps += 1
        await asyncio.sleep(0)


async def report():
    while True:
        with open(COUNT_FILE + ".tmp", "w") as fh:
            fh.write(f"{steps} {time.monotonic()}\n")
        import os

        os.replace(COUNT_FILE + ".tmp", COUNT_FILE)
        await asyncio.sleep(0.1)


async def main():
    event = asyncio.Event()
    tasks = [asyncio.create_task(parked(event)) for _ in range(N - BUSY - 1)]
    tasks += [asyncio.create_task(busy()) for _ in range(BUSY)]
    tasks.append(asyncio.create_task(report()))
    await asyncio.sleep(0.3)
    print("ready", flush=True)
    await asyncio.gather(*tasks)


asyncio.run(main())
