"""Prometheus metrics of this process from the in-process monitor (``gilty.observe.monitor``).

    import gilty.observe.prometheus
    gilty.observe.prometheus.register()          # default registry; starts the monitor if needed

Metrics (counters in seconds, by Prometheus conventions):
  gilty_gil_hold_seconds_total{pid,thread,tid}   time a thread held the GIL (collections included)
  gilty_gil_wait_seconds_total{pid,thread,tid}   time a thread waited for the GIL
  gilty_thread_state_seconds_total{pid,thread,tid,state}   every state, for dashboards that split them
  gilty_gc_pause_seconds{pid,generation}         histogram of exact collection pauses
  gilty_process_private_bytes{pid} / gilty_process_shared_bytes{pid}   prefork workers' sharing

Under gunicorn's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set), custom collectors are not
merged across workers; ``export_multiprocess()`` instead copies the figures into prometheus_client's
own metric objects once a second from a small thread, so every worker's series carry its pid.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Optional

from gilty._visible import visible
from gilty.observe.monitor import DEFAULT_INTERVAL_S, gil_stats, running, start
from gilty.observe.monitor.gc_pauses import BUCKETS_S
from gilty.observe.monitor.memory_self import memory_self

HOLD_STATES = ("holding_gil", "gc")


def _require_client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ImportError("gilty.observe.prometheus needs prometheus_client (pip install prometheus-client)") from None
    return prometheus_client


def _thread_labels(pid: str, t: dict) -> list:
    # A thread's name is any library's choice: written out as the text outputs show it, so a terminal
    # reading /metrics acts on none of its characters (prometheus_client escapes only \\, " and \n).
    return [pid, visible(t["name"], 0), str(t["tid"])]


class GiltyCollector:
    """A prometheus_client collector reading ``gil_stats()`` at scrape time."""

    def __init__(self, stats: Callable[[], dict] = gil_stats, memory: Callable[[], Optional[dict]] = memory_self):
        self._stats = stats
        self._memory = memory

    def describe(self) -> list:
        return []  # unchecked collector: the thread set changes between scrapes

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        s = self._stats()
        pid = str(s["pid"])
        labels = ["pid", "thread", "tid"]
        hold = CounterMetricFamily("gilty_gil_hold_seconds", "Seconds the thread held the GIL, GC included.", labels=labels)
        wait = CounterMetricFamily("gilty_gil_wait_seconds", "Seconds the thread waited for the GIL.", labels=labels)
        state = CounterMetricFamily(
            "gilty_thread_state_seconds", "Seconds the thread spent in each state.", labels=[*labels, "state"]
        )
        for t in s["threads"]:
            secs = t["seconds"]
            lab = _thread_labels(pid, t)
            hold.add_metric(lab, sum(secs[k] for k in HOLD_STATES))
            wait.add_metric(lab, secs["waiting_gil"])
            for name, value in secs.items():
                state.add_metric([*lab, name], value)
        yield hold
        yield wait
        yield state
        pauses = HistogramMetricFamily(
            "gilty_gc_pause_seconds", "Garbage collection pauses, exact.", labels=["pid", "generation"]
        )
        for generation, g in s["gc"]["by_generation"].items():
            cumulative, buckets = 0, []
            for bound in [*map(str, BUCKETS_S), "+Inf"]:
                cumulative += g["buckets"][bound]
                buckets.append((bound, cumulative))
            pauses.add_metric([pid, generation], buckets, g["pause_s"])
        yield pauses
        mem = self._memory()
        if mem is not None:
            private = GaugeMetricFamily("gilty_process_private_bytes", "Memory only this process maps.", labels=["pid"])
            shared = GaugeMetricFamily("gilty_process_shared_bytes", "Memory shared with other processes.", labels=["pid"])
            private.add_metric([pid], mem["private"])
            shared.add_metric([pid], mem["shared"])
            yield private
            yield shared


def register(registry: Any = None, *, interval: float = DEFAULT_INTERVAL_S, start_monitor: bool = True) -> GiltyCollector:
    """Register the collector (default: prometheus_client's default registry); start the monitor."""
    client = _require_client()
    if start_monitor and not running():
        start(interval)
    collector = GiltyCollector()
    (registry if registry is not None else client.REGISTRY).register(collector)
    return collector


class _MultiprocessExporter:
    """Copies gil_stats() into prometheus_client metric objects (multiprocess mode) every ``period``."""

    def __init__(self, period: float) -> None:
        client = _require_client()
        labels = ["worker_pid", "thread", "tid"]
        self.hold = client.Counter("gilty_gil_hold_seconds", "Seconds the thread held the GIL.", labels)
        self.wait = client.Counter("gilty_gil_wait_seconds", "Seconds the thread waited for the GIL.", labels)
        self.gc = client.Histogram(
            "gilty_gc_pause_seconds", "Garbage collection pauses.", ["worker_pid", "generation"], buckets=BUCKETS_S
        )
        self.private = client.Gauge("gilty_process_private_bytes", "Memory only this worker maps.", multiprocess_mode="liveall")
        self.shared = client.Gauge(
            "gilty_process_shared_bytes", "Memory shared with other processes.", multiprocess_mode="liveall"
        )
        self.period = period
        self.sent: dict = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="gilty-prometheus-export", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.wait(self.period):
            self.export_once()

    def export_once(self) -> None:
        s = gil_stats()
        pid = str(s["pid"])
        for t in s["threads"]:
            lab = _thread_labels(pid, t)
            secs = t["seconds"]
            for metric, value in ((self.hold, sum(secs[k] for k in HOLD_STATES)), (self.wait, secs["waiting_gil"])):
                key = (id(metric), *lab)
                delta = value - self.sent.get(key, 0.0)
                if delta > 0:
                    metric.labels(*lab).inc(delta)
                    self.sent[key] = value
        for generation, g in s["gc"]["by_generation"].items():
            key = ("gc", generation)
            seen = self.sent.get(key, 0)
            if g["count"] > seen:
                # Pauses since the last export are spread evenly: the buckets stay exact in count.
                mean = g["pause_s"] / g["count"]
                for _ in range(g["count"] - seen):
                    self.gc.labels(pid, generation).observe(mean)
                self.sent[key] = g["count"]
        mem = memory_self()
        if mem is not None:
            self.private.set(mem["private"])
            self.shared.set(mem["shared"])


def export_multiprocess(period: float = 1.0, interval: float = DEFAULT_INTERVAL_S) -> Any:
    """For gunicorn workers under PROMETHEUS_MULTIPROC_DIR: start the monitor and the exporter thread."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        raise RuntimeError("export_multiprocess() needs PROMETHEUS_MULTIPROC_DIR (prometheus_client multiprocess mode)")
    if not running():
        start(interval)
    return _MultiprocessExporter(period)
