"""A stable tree of asyncio tasks plus churn: batches of short-lived tasks created and finished at
about 10,000 per second, while the stable ones hold still.

    python asyncio_churn.py TRUTH.json [RATE]

The stable tree: main gathers `holder-i` (i < 20) each gathers `leaf-i-0` and `leaf-i-1`, which sleep forever.
`spawner` gathers batches of 100 `churn` tasks (each awaits asyncio.sleep(0) once, then returns).
TRUTH.json gets the stable tasks (id, name, innermost frame, parent) and the churn worker's lines;
TRUTH.json.count gets the number of churn tasks created so far, rewritten every 0.2 s.
"""

import asyncio
import json
import sys
import time

TRUTH = sys.argv[1]
RATE = float(sys.argv[2]) if len(sys.argv) > 2 else 10000.0
BATCH = 100
created = 0


async def leaf():
    await asyncio.sleep(3600)  # LINE:leaf


async def holder(i):
    loop = asyncio.get_running_loop()
    kids = [loop.create_task(leaf(), name=f"leaf-{i}-{k}") for k in range(2)]
    await asyncio.gather(*kids)  # LINE:holder


async def worker():
    await asyncio.sleep(0)  # LINE:worker


async def spawner():
    global created
    loop = asyncio.get_running_loop()
    start = time.monotonic()
    while True:
        batch = [loop.create_task(worker(), name="churn") for _ in range(BATCH)]
        created += BATCH
        await asyncio.gather(*batch)  # LINE:spawner
        ahead = created / RATE - (time.monotonic() - start)
        if ahead > 0:
            await asyncio.sleep(ahead)


def write_count():
    with open(TRUTH + ".count", "w") as fh:
        fh.write(f"{created} {time.monotonic()}\n")
    asyncio.get_running_loop().call_later(0.2, write_count)


def line_of(tag):
    for n, text in enumerate(open(__file__), 1):
        if f"# LINE:{tag}" in text:
            return n


async def main():
    loop = asyncio.get_running_loop()
    main_name = asyncio.current_task().get_name()  # main gathers the holders
    holders = [loop.create_task(holder(i), name=f"holder-{i}") for i in range(20)]
    await asyncio.sleep(0.3)
    stable = []
    for t in asyncio.all_tasks():
        name = t.get_name()
        if name.startswith(("holder-", "leaf-")):
            parent = main_name if name.startswith("holder-") else "holder-" + name.split("-")[1]
            line = line_of("holder" if name.startswith("holder-") else "leaf")
            stable.append({"id": id(t), "name": name, "parent": parent, "line": line})
    with open(TRUTH, "w") as fh:
        json.dump({"stable": stable, "worker_lines": [worker.__code__.co_firstlineno, line_of("worker")],
                   "file": __file__}, fh)
    loop.create_task(spawner(), name="spawner")
    write_count()
    print("ready", flush=True)
    await asyncio.gather(*holders)


asyncio.run(main())
