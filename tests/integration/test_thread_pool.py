"""A ThreadPoolExecutor(8) batch job (tests/targets/pool_batch.py) as `gilty record` reports it:
the pool's idle wait is idle, not error handling, and the pool is one row of the text report
(issue 31, items 4 and 10)."""

from __future__ import annotations

import json

import pytest

from conftest import record_json, run_gilty, running_target

pytestmark = pytest.mark.interpreter

POOL = "ThreadPoolExecutor-0_"


def pool_threads(report: dict) -> list:
    return [t for t in report["threads"] if t["name"].startswith(POOL)]


@pytest.fixture(scope="module")
def recorded(interp, tmp_path_factory):
    if interp.id.startswith("debian") or interp.minor_str != "3.12":
        # 3.12 moved the executor's blocking get into `except queue.Empty:` (3.10/3.11 block outside
        # any except); what the report does with a pool reads nothing version-specific.
        pytest.skip("the pool's wait inside `except` and its merged row: checked on pyenv 3.12 only (suite time)")
    with running_target(interp, "pool_batch.py") as proc:
        report = record_json(proc.pid, duration=1.5, rate=200)
    path = tmp_path_factory.mktemp("pool") / "rec.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    return report, path


# Guards issue 31 item 4: every idle pool thread of a 3.12 program read 25-90 % "handling an
# exception", its wait for work sitting in `except queue.Empty:`.
def test_idle_pool_threads_are_not_in_error_paths(interp, recorded):
    report, path = recorded
    pool = pool_threads(report)
    assert len(pool) == 8, [t["name"] for t in report["threads"]]
    for t in pool:
        assert t["states"]["idle"] >= 0.5, t["states"]
        assert t["handling_exception_share"] <= 0.05, (t["name"], t["handling_exception_share"], t["states"])
    rc, out, err = run_gilty("report", path, "--format", "text", timeout=60)
    assert rc == 0, err
    assert "Time in error paths" not in out, out
