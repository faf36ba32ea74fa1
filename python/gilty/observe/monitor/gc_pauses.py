"""Exact garbage-collection pauses of this process, from ``gc.callbacks``.

The callback runs inside the collection, which can start in any thread at any allocation, including
one made while that thread holds a lock (ours in ``snapshot()``, or an exporter's). So the callback
takes no lock and calls nothing: it appends the pause to a deque (atomic), and everything else —
folding pauses into the per-generation figures, calling listeners — happens outside collections,
when the figures are read or in a small listener thread.
"""

from __future__ import annotations

import bisect
import collections
import gc
import threading
import time
from typing import Optional

# Upper bounds of the pause histogram, in seconds (Prometheus-style cumulative buckets are derived).
BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# How often the listener thread hands new pauses to listeners.
LISTENER_PERIOD_S = 0.25


class GenerationPauses:
    __slots__ = ("count", "total_s", "max_s", "collected", "buckets")

    def __init__(self) -> None:
        self.count = 0
        self.total_s = 0.0
        self.max_s = 0.0
        self.collected = 0
        self.buckets = [0] * (len(BUCKETS_S) + 1)  # the last one is +Inf

    def add(self, pause_s: float, collected: int) -> None:
        self.count += 1
        self.total_s += pause_s
        self.max_s = max(self.max_s, pause_s)
        self.collected += collected
        self.buckets[bisect.bisect_left(BUCKETS_S, pause_s)] += 1

    def as_dict(self) -> dict:
        return {
            "count": self.count,
            "pause_s": self.total_s,
            "max_s": self.max_s,
            "collected": self.collected,
            "buckets": dict(zip([*map(str, BUCKETS_S), "+Inf"], self.buckets)),
        }


class GcPauses:
    """Installs one callback in ``gc.callbacks``; ``remove()`` takes it out again."""

    def __init__(self) -> None:
        self._started: Optional[float] = None
        self._pending: collections.deque = collections.deque()  # (generation, pause_s, collected)
        self._lock = threading.Lock()
        self.by_generation: dict = {}
        # Called as listener(generation, pause_s) for each collection, from the listener thread.
        self.listeners: list = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        started, self._started = self._started, None
        if started is not None:  # None: installed mid-collection
            self._pending.append((int(info.get("generation", -1)), time.perf_counter() - started, int(info.get("collected", 0))))

    def _drain(self) -> list:
        """Fold pending pauses in (outside any collection); returns them for the listeners."""
        new = []
        with self._lock:
            while True:
                try:
                    generation, pause, collected = self._pending.popleft()
                except IndexError:
                    break
                entry = self.by_generation.get(generation)
                if entry is None:
                    entry = self.by_generation[generation] = GenerationPauses()
                entry.add(pause, collected)
                new.append((generation, pause))
        return new

    def add_listener(self, listener) -> None:
        with self._lock:
            self.listeners.append(listener)
            if self._thread is None:
                self._thread = threading.Thread(target=self._notify_loop, name="gilty-gc-listeners", daemon=True)
                self._thread.start()

    def _notify_loop(self) -> None:
        while not self._stop.wait(LISTENER_PERIOD_S):
            self._notify(self._drain())
        self._notify(self._drain())

    def _notify(self, pauses: list) -> None:
        for generation, pause in pauses:
            for listener in list(self.listeners):
                try:
                    listener(generation, pause)
                except Exception:  # noqa: BLE001 - an exporter's failure must not stop the others
                    pass

    def remove(self) -> None:
        try:
            gc.callbacks.remove(self._callback)
        except ValueError:
            pass
        self._stop.set()

    @staticmethod
    def empty_snapshot() -> dict:
        return {"collections": 0, "pause_s": 0.0, "by_generation": {}}

    def snapshot(self) -> dict:
        # Whoever drains hands the pauses on: drained here, they would never reach the listeners.
        self._notify(self._drain())
        with self._lock:
            gens = {str(g): p.as_dict() for g, p in sorted(self.by_generation.items())}
        return {
            "collections": sum(g["count"] for g in gens.values()),
            "pause_s": sum(g["pause_s"] for g in gens.values()),
            "by_generation": gens,
        }
