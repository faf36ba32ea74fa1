"""WSGI app whose threads churn the way a fleet's do: every request is handed to a module-level
ThreadPoolExecutor ("ThreadPoolExecutor-0_N") and also starts a one-off thread of its own
("Thread-N (_one_off)"), so new thread ids and new numbered names appear all the time. Run under
gunicorn's gthread worker, which has a pool of its own."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

_POOL = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    # Created in the worker after the fork (a pool's threads do not survive a fork).
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=4)
        return _POOL


def _work(n: int) -> int:
    # 20 ms asleep: concurrent requests fill the pools, and a 50 Hz sampler sees most one-off threads.
    time.sleep(0.02)
    return sum(i * i for i in range(n))


def _one_off(out: list) -> None:
    out.append(_work(5_000))


def app(environ, start_response):
    out: list = []
    t = threading.Thread(target=_one_off, args=(out,))
    t.start()
    total = _pool().submit(_work, 10_000).result()
    t.join()
    body = f"{total + out[0]}\n".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
