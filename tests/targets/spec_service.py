"""A FastAPI service whose request handler has sites that do not stay specialized, for
`gilty specialization` on a worker under load:

  total()       `r.amount` over orders and refunds alternating: two receiver classes at one site
  lazy_total()  `p.amount` through a proxy's __getattr__: the lookup cannot be specialized
  mono_total()  `r.amount` over orders only: stays specialized (the control)
  a helper thread parked in `Condition.wait` with a short timeout, as a thread pool's idle workers
  are: it wakes every 2 ms and parks again in C, and must never be ranked

Run: uvicorn spec_service:app --app-dir tests/targets --port PORT"""

import threading

from fastapi import FastAPI

app = FastAPI()


class Order:
    def __init__(self, amount):
        self.amount = amount


class Refund:
    def __init__(self, amount):
        self.kind = "refund"
        self.amount = -amount


class Proxy:
    def __init__(self, target):
        self._target = target

    def __getattr__(self, name):
        return getattr(self._target, name)


def parked():
    cond = threading.Condition()
    with cond:
        while True:
            cond.wait(0.002)  # LINE:parked


threading.Thread(target=parked, name="parked", daemon=True).start()

MIXED = [Order(3), Refund(1)] * 100
PROXIES = [Proxy(Order(2))] * 100
ORDERS = [Order(5)] * 100


def total(records):
    t = 0
    for r in records:
        t += r.amount  # LINE:total
    return t


def lazy_total(items):
    t = 0
    for p in items:
        t += p.amount  # LINE:lazy_total
    return t


def mono_total(records):
    t = 0
    for r in records:
        t += r.amount  # LINE:mono_total
    return t


@app.get("/")
async def root():
    n = 0
    for _ in range(10):
        n += total(MIXED) + lazy_total(PROXIES) + mono_total(ORDERS)
    return {"n": n}
