"""Exact garbage-collection pauses of this process, from ``gc.callbacks``.

The callback runs inside the collection (the GIL is already held there), so it adds two clock
reads per collection and takes nothing from other threads.
"""

from __future__ import annotations

import bisect
import gc
import threading
import time
from typing import Optional

# Upper bounds of the pause histogram, in seconds (Prometheus-style cumulative buckets are derived).
BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


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
        self._lock = threading.Lock()
        self.by_generation: dict = {}
        # Called as listener(generation, pause_s) after each collection (e.g. an OTel histogram).
        self.listeners: list = []
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        started, self._started = self._started, None
        if started is None:  # installed mid-collection
            return
        pause = time.perf_counter() - started
        generation = int(info.get("generation", -1))
        with self._lock:
            entry = self.by_generation.get(generation)
            if entry is None:
                entry = self.by_generation[generation] = GenerationPauses()
            entry.add(pause, int(info.get("collected", 0)))
        for listener in self.listeners:
            try:
                listener(generation, pause)
            except Exception:  # noqa: BLE001 - an exporter's failure must not break the collector
                pass

    def remove(self) -> None:
        try:
            gc.callbacks.remove(self._callback)
        except ValueError:
            pass

    @staticmethod
    def empty_snapshot() -> dict:
        return {"collections": 0, "pause_s": 0.0, "by_generation": {}}

    def snapshot(self) -> dict:
        with self._lock:
            gens = {str(g): p.as_dict() for g, p in sorted(self.by_generation.items())}
        return {
            "collections": sum(g["count"] for g in gens.values()),
            "pause_s": sum(g["pause_s"] for g in gens.values()),
            "by_generation": gens,
        }
