"""pytest plugin: ``pytest --gilty`` measures each test's GIL hold, wait and GC share with the
in-process monitor and fails the tests that exceed ``@pytest.mark.gil_budget(...)``.

    @pytest.mark.gil_budget(max_wait=0.2)      # no thread may wait for the GIL >20% of the test
    def test_handler_under_load(): ...

Shares are per thread, of the test's wall time (the call phase). Without ``--gilty`` the plugin
does nothing (the marker is still registered, so ``--strict-markers`` accepts it).
"""

from __future__ import annotations

import time

import pytest

BUDGET_KEYS = {"max_wait": ("waiting_gil",), "max_hold": ("holding_gil", "gc"), "max_gc": ("gc",)}
WORDS = {"max_wait": "waited for the GIL", "max_hold": "held the GIL", "max_gc": "collected garbage"}


def pytest_addoption(parser):
    group = parser.getgroup("gilty", "GIL budgets (gilty)")
    group.addoption(
        "--gilty", action="store_true", help="measure each test's GIL hold/wait/gc per thread; enforce gil_budget markers"
    )
    group.addoption("--gilty-interval", type=float, default=0.001, metavar="S", help="monitor interval (default 0.001 s)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gil_budget(max_wait=None, max_hold=None, max_gc=None): with --gilty, fail the test when any thread "
        "waits for / holds the GIL / collects garbage more than this share of the test's time",
    )
    if config.getoption("gilty", False):
        import gilty.observe.monitor

        gilty.observe.monitor.start(config.getoption("gilty_interval"))
        config._gilty_enabled = True


def _seconds() -> dict:
    from gilty import gil_stats

    return {t["tid"]: (t["name"], t["seconds"]) for t in gil_stats()["threads"]}


def _usage(before: dict, after: dict, wall_s: float) -> dict:
    """{tid: (name, {budget key: share of wall_s})} over the test."""
    out = {}
    for tid, (name, secs) in after.items():
        old = before.get(tid, (name, {}))[1]
        shares = {}
        for key, states in BUDGET_KEYS.items():
            spent = sum(secs.get(s, 0.0) - old.get(s, 0.0) for s in states)
            shares[key] = max(0.0, spent) / wall_s if wall_s > 0 else 0.0
        out[tid] = (name, shares)
    return out


def _over_budget(usage: dict, limits: dict) -> list:
    """[(key, name, share, limit)], worst first."""
    over = []
    for key, limit in limits.items():
        for _tid, (name, shares) in usage.items():
            if shares[key] > limit:
                over.append((key, name, shares[key], limit))
    return sorted(over, key=lambda o: o[3] - o[2])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not getattr(item.config, "_gilty_enabled", False):
        return (yield)
    marker = item.get_closest_marker("gil_budget")
    before = _seconds()
    started = time.monotonic()
    try:
        result = yield
    finally:
        wall = time.monotonic() - started
    time.sleep(0.002)  # let the monitor take the pass that closes the test
    usage = _usage(before, _seconds(), wall)
    worst_wait = max((s["max_wait"] for _n, s in usage.values()), default=0.0)
    item.user_properties.append(("gilty_max_wait_share", round(worst_wait, 4)))
    if marker is not None:
        unknown = set(marker.kwargs) - set(BUDGET_KEYS)
        if unknown or marker.args:
            raise pytest.UsageError(
                f"gil_budget takes only {', '.join(BUDGET_KEYS)} as keywords, got {sorted(unknown) or marker.args}"
            )
        over = _over_budget(usage, {k: float(v) for k, v in marker.kwargs.items() if v is not None})
        if over:
            key, name, share, limit = over[0]
            pytest.fail(
                f"GIL budget exceeded: thread {name!r} {WORDS[key]} {share:.0%} of the test ({key}={limit:.0%})",
                pytrace=False,
            )
    return result
