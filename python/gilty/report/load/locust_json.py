"""The JSON report of a Locust run (``load.result.LocustResult``)."""

from __future__ import annotations

import json

from gilty.report.load.json import FORMAT_VERSION


def locust_report(run: dict) -> dict:
    return {"format_version": FORMAT_VERSION, "kind": "load_locust", "loop": "closed", **run}


def render(result) -> str:
    return json.dumps(locust_report(result.figures), indent=2) + "\n"
