"""Task states: "spinner" runs (a busy loop in spin() <- work()) while "sleeper" sleeps and
"stubborn" (3.11+) was cancelled, caught the CancelledError and awaits an Event: it stays cancelling.
Prints "ready" from inside the running task, just before it starts spinning."""
import asyncio


def spin():
    n = 0
    while True:
        n += 1  # LINE:spin


async def work():
    await asyncio.sleep(0.1)
    print("ready", flush=True)
    spin()


async def stubborn(event):
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await event.wait()  # LINE:stubborn


async def main():
    event = asyncio.Event()
    s = asyncio.create_task(stubborn(event), name="stubborn")
    asyncio.create_task(asyncio.sleep(3600), name="sleeper")
    await asyncio.sleep(0)
    s.cancel()
    await asyncio.create_task(work(), name="spinner")


asyncio.run(main())
