"""OpenTelemetry metrics of this process from the in-process monitor, through ``opentelemetry-sdk``.

    from opentelemetry.sdk.metrics import MeterProvider
    import gilty.observe.otel
    gilty.observe.otel.register(provider)        # or the global provider; starts the monitor if needed

Instruments: observable counters ``gilty.gil.hold`` and ``gilty.gil.wait`` (unit s, attributes
``thread.name``, ``thread.id``, ``process.pid``), ``gilty.thread.state`` (adds ``state``), a histogram
``gilty.gc.pause`` (unit s, attribute ``generation``) fed by every collection, and observable gauges
``gilty.process.private`` / ``gilty.process.shared`` (unit By). Export with any reader/exporter, e.g. OTLP.
"""

from __future__ import annotations

from typing import Any

from gilty.observe.monitor import DEFAULT_INTERVAL_S, add_gc_listener, gil_stats, running, start
from gilty.observe.monitor.memory_self import memory_self

HOLD_STATES = ("holding_gil", "gc")


def _observations(metric: str):
    from opentelemetry.metrics import Observation

    def callback(_options: Any) -> list:
        s = gil_stats()
        out = []
        for t in s["threads"]:
            attrs = {"process.pid": s["pid"], "thread.name": t["name"], "thread.id": t["tid"]}
            secs = t["seconds"]
            if metric == "hold":
                out.append(Observation(sum(secs[k] for k in HOLD_STATES), attrs))
            elif metric == "wait":
                out.append(Observation(secs["waiting_gil"], attrs))
            else:
                out.extend(Observation(v, {**attrs, "state": k}) for k, v in secs.items())
        return out

    return callback


def _memory(kind: str):
    from opentelemetry.metrics import Observation

    def callback(_options: Any) -> list:
        mem = memory_self()
        return [] if mem is None else [Observation(mem[kind], {"process.pid": gil_stats()["pid"]})]

    return callback


def register(meter_provider: Any = None, *, interval: float = DEFAULT_INTERVAL_S) -> Any:
    """Create gilty's instruments on ``meter_provider`` (default: the global one). Returns the meter."""
    try:
        from opentelemetry import metrics
    except ImportError:
        raise ImportError("gilty.observe.otel needs opentelemetry-sdk (pip install opentelemetry-sdk)") from None
    if not running():
        start(interval)
    meter = (meter_provider or metrics.get_meter_provider()).get_meter("gilty")
    meter.create_observable_counter(
        "gilty.gil.hold", [_observations("hold")], unit="s", description="Time a thread held the GIL, GC included"
    )
    meter.create_observable_counter(
        "gilty.gil.wait", [_observations("wait")], unit="s", description="Time a thread waited for the GIL"
    )
    meter.create_observable_counter(
        "gilty.thread.state", [_observations("state")], unit="s", description="Time a thread spent in each state"
    )
    meter.create_observable_gauge(
        "gilty.process.private", [_memory("private")], unit="By", description="Memory only this process maps"
    )
    meter.create_observable_gauge(
        "gilty.process.shared", [_memory("shared")], unit="By", description="Memory shared with other processes"
    )
    pauses = meter.create_histogram("gilty.gc.pause", unit="s", description="Garbage collection pauses, exact")
    add_gc_listener(lambda generation, pause: pauses.record(pause, {"generation": str(generation)}))
    return meter
