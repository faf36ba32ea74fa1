"""A recording whose timeline outgrows its budget keeps it within the budget, and says so.

GILTY_TIMELINE_BUDGET forces a small budget (sampling/timeline.py), so a few seconds at 1000 Hz of
30 threads changing state every few milliseconds are enough: what is checked is what the recording
keeps (passes and runs), not time or memory, so it holds while other tests run.
"""

from __future__ import annotations

import json

import pytest
from conftest import one_version, record_json, run_gilty, running_target

pytestmark = [pytest.mark.interpreter]

BUDGET = 2000


def test_a_long_recording_keeps_its_timeline_within_the_budget(interp, monkeypatch, tmp_path):
    one_version(interp, "how much of a recording is kept")
    monkeypatch.setenv("GILTY_TIMELINE_BUDGET", str(BUDGET))
    with running_target(interp, "napping_threads.py", "30") as proc:
        report = record_json(proc.pid, duration=4.0, rate=1000.0)
        rc, _out, err = run_gilty(
            "record", "--pid", proc.pid, "--duration", 2, "--rate", 1000, "--format", "chrome", "-o", tmp_path / "t.json"
        )
        assert rc == 0, err
    raw = report["recording"]["processes"][0]
    runs = sum(len(columns["passes"]) for columns in raw["runs"].values())
    assert len(raw["times"]) <= BUDGET and runs <= BUDGET, (len(raw["times"]), runs)
    step = report["timeline"]["step"]
    assert step > 1 and raw["timeline"]["step"] == step
    assert report["timeline"]["note"] == f"timeline resolution {step:g} ms after coarsening (every {step}th pass kept)"
    # The figures count every pass, not the kept ones.
    assert report["samples"] == raw["timeline"]["passes"] > len(raw["times"])
    assert sum(t["samples"] for t in report["threads"]) >= 30 * len(raw["times"])
    trace = json.loads((tmp_path / "t.json").read_text())
    assert "after coarsening" in trace["otherData"]["timeline_notes"][str(proc.pid)]
    # Saved and read again, the report is the same.
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps(report))
    rc, out, err = run_gilty("report", saved, "--format", "json")
    assert rc == 0, err
    again = json.loads(out)
    assert again["timeline"] == report["timeline"] and again["verdict"] == report["verdict"]
    rc, _out, err = run_gilty("report", saved, "-o", tmp_path / "page.html")
    assert rc == 0, err
    assert report["timeline"]["note"] in (tmp_path / "page.html").read_text()
