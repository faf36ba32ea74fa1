"""A thread runs a loop of its own, leaves a task named "abandoned" pending on it and exits; the main
thread keeps the task and idles. Prints "ready" once the thread is gone.

On 3.14+ the task's thread state is gone with the thread: the task is on its interpreter's list."""
import asyncio
import threading

held = []


def orphan():
    loop = asyncio.new_event_loop()

    async def abandoned():
        await loop.create_future()

    held.append(loop.create_task(abandoned(), name="abandoned"))
    loop.run_until_complete(asyncio.sleep(0))


t = threading.Thread(target=orphan, name="gone")
t.start()
t.join()
print("ready", flush=True)
threading.Event().wait()
