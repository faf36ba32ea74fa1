"""Thread names in the in-process exporter's series (gilty.observe.prometheus): a thread's name is the
application's, or a library's it imported, and reaches whoever reads /metrics in a terminal (issue 30)."""

from __future__ import annotations

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from gilty.observe.prometheus import GiltyCollector  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

NAMES = {
    "title\x1b]0;owned\x07": "title\\x1b]0;owned\\x07",
    "cr\rrow": "cr\\rrow",
    "c1\x9b2J": "c1\\x9b2J",
    "rtl\u202eevil": "rtl\\u202eevil",
    "zero\u200bwidth": "zero\\u200bwidth",
    "tag\U000e0041": "tag\\U000e0041",
}


def test_thread_names_are_escaped_and_the_page_parses():
    seconds = {"holding_gil": 1.0, "gc": 0.0, "waiting_gil": 0.5}
    threads = [{"name": name, "tid": 10 + i, "seconds": seconds} for i, name in enumerate(NAMES)]
    stats = {"pid": 4242, "threads": threads, "gc": {"by_generation": {}}}
    registry = prometheus_client.CollectorRegistry()
    registry.register(GiltyCollector(stats=lambda: stats, memory=lambda: None))
    text = prometheus_client.generate_latest(registry).decode("utf-8")
    raw = [c for c in "\x1b\x07\r\x9b\u202e\u200b\U000e0041" if c in text]
    assert not raw, raw
    shown = {s.labels["thread"] for f in text_string_to_metric_families(text) for s in f.samples if "thread" in s.labels}
    assert shown == set(NAMES.values())
