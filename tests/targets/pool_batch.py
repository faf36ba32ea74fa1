"""A batch job on a ThreadPoolExecutor(8): each round parses a generated log text in pure Python
(parse_records), then compresses and hashes it (zlib, hashlib), one chunk per worker; between rounds
the eight pool threads sit idle in the executor's own wait for work (on 3.12+ inside
`except queue.Empty:`). The main thread sleeps in wait_for_round between rounds.

Prints "ready" once every worker thread has run a task. ``POOL_BUSY`` (default 0.01) is about the
seconds of work per task, ``POOL_GAP`` (default 0.1) the seconds between rounds.
"""

import hashlib
import os
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

WORKERS = 8
BUSY_S = float(os.environ.get("POOL_BUSY", "0.01"))
GAP_S = float(os.environ.get("POOL_GAP", "0.1"))
LINE = "2026-11-29T11:12:06 host=web-%d level=INFO path=/api/items/%d status=200 ms=%d\n"


def parse_records(text):
    records = []
    for line in text.splitlines():  # LINE:parse
        fields = {}
        for part in line.split(" ")[1:]:
            key, _, value = part.partition("=")
            fields[key] = value
        records.append(fields)
    return records


def task(seed):
    deadline = time.perf_counter() + BUSY_S
    digest = b""
    while time.perf_counter() < deadline:
        text = "".join(LINE % (seed, i, i % 97) for i in range(200))
        parse_records(text)
        data = zlib.compress(text.encode(), 6)
        digest = hashlib.sha256(data).digest()
    return digest


def wait_for_round():
    time.sleep(GAP_S)  # LINE:main_wait


with ThreadPoolExecutor(max_workers=WORKERS) as pool:
    first = True
    while True:
        list(pool.map(task, range(WORKERS)))
        if first:
            first = False
            print("ready", flush=True)
        wait_for_round()
