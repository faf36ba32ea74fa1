"""GC pauses from gc.callbacks reach every listener exactly once, whoever drains them: the listener
thread or a snapshot (gil_stats() takes one at every export)."""

from __future__ import annotations

import gc
import threading
import time

from gilty.observe.monitor.gc_pauses import LISTENER_PERIOD_S, GcPauses


def test_pauses_drained_by_a_snapshot_still_reach_the_listeners():
    pauses = GcPauses()
    seen = []
    lock = threading.Lock()

    def listener(generation, pause):
        with lock:
            seen.append((generation, pause))

    try:
        pauses.add_listener(listener)
        for _ in range(5):
            gc.collect()
            snap = pauses.snapshot()  # drains before the listener thread's next period
        time.sleep(3 * LISTENER_PERIOD_S)
        snap = pauses.snapshot()
    finally:
        pauses.remove()
    assert snap["by_generation"]["2"]["count"] >= 5
    with lock:
        full = [p for g, p in seen if g == 2]
    assert len(full) == snap["by_generation"]["2"]["count"], (len(full), snap)
    assert all(p >= 0 for p in full)


def test_snapshot_counts_every_collection_once():
    pauses = GcPauses()
    try:
        before = pauses.snapshot()["collections"]
        gc.collect()
        gc.collect()
        first = pauses.snapshot()
        second = pauses.snapshot()
    finally:
        pauses.remove()
    assert before == 0
    assert first["by_generation"]["2"]["count"] >= 2
    assert second == first
