"""Names of 4,100 characters (a generated function, a task named from a request): an asyncio task and
its coroutine parked in the main thread, and a thread running Python in a function of that name, so
that `dump --tasks` and `specialization` both meet them."""
import asyncio
import sys
import threading
import time
import types

LONG = "long_" + "n" * 4_100


def spin(stop):
    items = [1, 2, 3]
    total = 0
    while not stop.is_set():
        for x in items:
            total += x
        if total % 100_000 == 0:
            time.sleep(0.0005)  # leave the GIL to the loop now and then


def renamed(fn, name: str):
    fields = {"co_name": name, "co_filename": name + ".py"}
    if sys.version_info >= (3, 11):
        fields["co_qualname"] = name
    return types.FunctionType(fn.__code__.replace(**fields), fn.__globals__, name)


async def parked():
    await asyncio.sleep(3600)


async def main():
    coroutine = renamed(parked, LONG)
    asyncio.get_running_loop().create_task(coroutine(), name=LONG)
    await asyncio.sleep(0.1)
    print("ready", flush=True)
    await asyncio.sleep(3600)


stop = threading.Event()
threading.Thread(target=renamed(spin, LONG), args=(stop,), name=LONG, daemon=True).start()
asyncio.run(main())
