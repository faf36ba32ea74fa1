"""A FastAPI app whose requests wait in asyncio, for `gilty load --tasks` (tests/integration/test_load_tasks.py).

/sleep awaits asyncio.sleep(0.05) inside a helper coroutine; /sem awaits an asyncio.Semaphore(2)
around a 20 ms sleep, so above 100 requests per second its requests queue on the semaphore.
"""

import asyncio

from fastapi import FastAPI

app = FastAPI()
sem = None


async def helper():
    await asyncio.sleep(0.05)  # LINE:sleep


@app.get("/sleep")
async def sleep_endpoint():
    await helper()
    return {"ok": True}


@app.get("/sem")
async def sem_endpoint():
    global sem
    if sem is None:
        sem = asyncio.Semaphore(2)
    async with sem:  # LINE:acquire
        await asyncio.sleep(0.02)  # LINE:held
    return {"ok": True}
