"""The JSON report of a load run (``load.result.LoadRun``), which `gilty report` and `gilty compare` read
back."""

from __future__ import annotations

import json
from dataclasses import asdict

FORMAT_VERSION = 1


def report(run) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "kind": "load",
        "urls": [{"url": u, "weight": w} for u, w in run.urls],
        "arrivals": run.arrivals,
        "slo": None if run.slo is None else {"percentile": run.slo[0], "limit_s": run.slo[1]},
        "stopped": run.stopped,
        "steps": [dict(step, verdict=asdict(v)) for step, v in zip(run.steps, run.verdicts)],
        "knee": None if run.knee is None else asdict(run.knee),
        "workers_ready": run.workers_ready,
    }


def render(run) -> str:
    return json.dumps(report(run), indent=2) + "\n"
