"""Two threads, "loop-0" and "loop-1", each running its own event loop with three sleeping tasks
named t<i>-<k>; prints "ready" once both loops have their tasks."""
import asyncio
import threading

started = threading.Barrier(3)


async def sleeper():
    await asyncio.sleep(3600)


async def loop_main(i):
    for k in range(3):
        asyncio.get_running_loop().create_task(sleeper(), name=f"t{i}-{k}")
    await asyncio.sleep(0)
    started.wait()
    await asyncio.sleep(3600)


for i in range(2):
    threading.Thread(target=asyncio.run, args=(loop_main(i),), name=f"loop-{i}", daemon=True).start()
started.wait()
print("ready", flush=True)
threading.Event().wait()
