"""A known tree of asyncio tasks that then holds still; the target's own view of it goes to a file.

    python asyncio_tree.py TRUTH.json [--python-tasks] [--eager] [--uvloop]

main (asyncio.run) holds `lock`, then runs three group tasks in a TaskGroup (3.11+; a gather on
3.10). Each group gathers two children:
  group-0: sleeper-0 (asyncio.sleep)      + locker-0 (awaits the lock main holds)
  group-1: waiter-1 (awaits an Event)      + executor-1 (awaits run_in_executor on a blocked thread)
  group-2: shielder-2 (shields inner-2, which sleeps) + waitfor-2 (wait_for on inner-wait-2, an Event)
A `reporter` task, once all are suspended, schedules a plain callback (not a task, so every task is
suspended while it runs) that writes, for every task of asyncio.all_tasks(): its id, name, the
coroutine chain innermost first (qualname, file, line, followed through cr_await / gi_yieldfrom as
far as it goes), Task.get_stack()'s frames, and the parent it was built with. Then prints "ready".

On 3.14+ `--python-tasks` blocks `_asyncio` altogether: there the C module keeps the running task in
the thread state, where pure-Python tasks beside it are not seen (asyncio.timeout() fails in them).
"""

import sys

if "--python-tasks" in sys.argv and sys.version_info >= (3, 14):
    sys.modules["_asyncio"] = None

import asyncio
import json
import threading

TRUTH = sys.argv[1]
PYTHON_TASKS = "--python-tasks" in sys.argv
EAGER = "--eager" in sys.argv
if "--uvloop" in sys.argv:
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
HAS_TASKGROUP = sys.version_info >= (3, 11)

parents = {}  # task name -> the name of the task built to await it
blocker = threading.Event()  # the executor thread waits on it forever


def spawn(coro, name, parent):
    t = asyncio.get_running_loop().create_task(coro, name=name)
    parents[name] = parent
    return t


def chain(task):
    out = []
    c = task.get_coro()
    while c is not None:
        f = getattr(c, "cr_frame", None) or getattr(c, "gi_frame", None)
        if f is None:
            break
        out.append([c.__qualname__, f.f_code.co_filename, f.f_lineno])
        c = c.cr_await if hasattr(c, "cr_await") else getattr(c, "gi_yieldfrom", None)
    return out[::-1]


def report():
    tasks = []
    for t in asyncio.all_tasks():
        tasks.append({
            "id": id(t),
            "name": t.get_name(),
            "chain": chain(t),
            "get_stack": [[f.f_code.co_name, f.f_code.co_filename, f.f_lineno] for f in t.get_stack()],
            "parent": parents.get(t.get_name()),
            "python_impl": type(t) is not asyncio.tasks._CTask if hasattr(asyncio.tasks, "_CTask") else True,
        })
    with open(TRUTH, "w") as fh:
        json.dump({"version": list(sys.version_info[:3]), "tasks": tasks}, fh)
    print("ready", flush=True)


async def sleeper():
    await asyncio.sleep(3600)


async def locker(lock):
    async with lock:
        pass


async def waiter(event):
    await event.wait()


async def executor():
    await asyncio.get_running_loop().run_in_executor(None, blocker.wait)


async def shielder(name):
    inner = spawn(sleeper(), f"inner-{name}", f"shielder-{name}")
    await asyncio.shield(inner)


async def waitfor(name, event):
    inner = spawn(waiter(event), f"inner-wait-{name}", f"waitfor-{name}")
    await asyncio.wait_for(inner, 3600)


async def group(i, lock, event):
    me = f"group-{i}"
    if i == 0:
        a, b = spawn(sleeper(), "sleeper-0", me), spawn(locker(lock), "locker-0", me)
    elif i == 1:
        a, b = spawn(waiter(event), "waiter-1", me), spawn(executor(), "executor-1", me)
    else:
        a, b = spawn(shielder("2"), "shielder-2", me), spawn(waitfor("2", event), "waitfor-2", me)
    await asyncio.gather(a, b)


async def reporter():
    await asyncio.sleep(0.5)
    asyncio.get_running_loop().call_soon(report)
    await asyncio.Event().wait()


async def main():
    loop = asyncio.get_running_loop()
    if PYTHON_TASKS:
        py_task = asyncio.tasks._PyTask
        loop.set_task_factory(lambda loop, coro, **kw: py_task(coro, loop=loop, **kw))
    elif EAGER:
        loop.set_task_factory(asyncio.eager_task_factory)
    me = asyncio.current_task().get_name()
    parents[me] = None
    lock, event = asyncio.Lock(), asyncio.Event()
    await lock.acquire()
    keep = spawn(reporter(), "reporter", None)
    if HAS_TASKGROUP:
        async with asyncio.TaskGroup() as tg:
            for i in range(3):
                tg.create_task(group(i, lock, event), name=f"group-{i}")
                parents[f"group-{i}"] = me
    else:
        await asyncio.gather(*(spawn(group(i, lock, event), f"group-{i}", me) for i in range(3)))
    await keep


asyncio.run(main())
