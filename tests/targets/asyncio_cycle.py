"""asyncio tasks stuck for good in await cycles, beside ordinary ones.

    python asyncio_cycle.py

cycle-a awaits cycle-b, which awaits cycle-a; ring-0 awaits ring-1, ring-1 a gather holding ring-2,
ring-2 ring-0; selfish awaits a gather that holds itself; hanger awaits cycle-a (it waits on a
cycle without being in it). sleeper sleeps and main waits on an Event: 9 tasks in all. Prints
"ready" once every task is suspended.
"""

import asyncio

tasks = {}


async def cycle_a():
    await tasks["cycle-b"]  # LINE:cycle_a


async def cycle_b():
    await tasks["cycle-a"]  # LINE:cycle_b


async def selfish():
    await asyncio.gather(asyncio.current_task())  # LINE:selfish


async def hanger():
    await tasks["cycle-a"]  # LINE:hanger


async def ring(i):
    other = tasks[f"ring-{(i + 1) % 3}"]
    if i == 1:
        await asyncio.gather(other)  # LINE:ring_gather
    else:
        await other  # LINE:ring


async def sleeper():
    await asyncio.sleep(3600)


async def main():
    loop = asyncio.get_running_loop()
    for name, coro in [("cycle-a", cycle_a), ("cycle-b", cycle_b), ("selfish", selfish), ("hanger", hanger), ("sleeper", sleeper)]:
        tasks[name] = loop.create_task(coro(), name=name)
    for i in range(3):
        tasks[f"ring-{i}"] = loop.create_task(ring(i), name=f"ring-{i}")
    await asyncio.sleep(0.2)
    print("ready", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
