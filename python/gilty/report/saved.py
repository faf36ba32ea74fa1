"""`gilty report` of a saved load, specialization or compare JSON report: the same text, JSON and
HTML as the command wrote, rebuilt from the file (a recording's formats are in ``report.render``).

A load report keeps no per-step server recording, so its text has no "server during each step"
lines and its page no flame graph; everything else is as first written.
"""

from __future__ import annotations

import json
from dataclasses import fields

KINDS = ("load", "specialization", "opcache", "compare")
FORMATS = ("text", "json", "html")


class NotThisFormat(ValueError):
    """The kind of report has no such format (a load run has no flame graph)."""


def load_run(data: dict):
    """The ``LoadRun`` the load renderers take, from its JSON report."""
    from gilty.load.analysis import Knee, StepVerdict
    from gilty.load.result import LoadRun

    def build(cls, d):
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    steps = [{k: v for k, v in step.items() if k != "verdict"} for step in data["steps"]]
    slo = data.get("slo")
    return LoadRun(
        urls=[(u["url"], u["weight"]) for u in data["urls"]],
        arrivals=data["arrivals"],
        slo=None if slo is None else (slo["percentile"], slo["limit_s"]),
        stopped=data.get("stopped", False),
        steps=steps,
        verdicts=[build(StepVerdict, step["verdict"]) for step in data["steps"]],
        knee=None if data.get("knee") is None else build(Knee, data["knee"]),
        profiles=[],
        workers_ready=data.get("workers_ready"),
    )


def render(kind: str, data: dict, fmt: str) -> str:
    if kind == "opcache" and fmt == "html":
        raise NotThisFormat("the Python 3.10 opcache report is written as text or json")
    if fmt not in FORMATS:
        raise NotThisFormat(f"a {kind} report is written as {', '.join(FORMATS)}, not {fmt}")
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if kind == "load":
        from gilty.report.load import text as load

        if fmt == "html":
            from gilty.report.recording import html as html_report
            from gilty.sampling.session import Recording

            return html_report.render(Recording(rate_hz=100.0), load=data)
        return load.render(load_run(data))
    if kind == "opcache":
        from gilty.report.specialization import text as specialization_text

        return specialization_text.render_opcache(data)
    if kind == "specialization":
        from gilty.report.specialization import html as specialization_html
        from gilty.report.specialization import text as specialization_text
        from gilty.specialization.session import SpecializationSession

        session = SpecializationSession.from_dict(data["session"])
        return (specialization_html if fmt == "html" else specialization_text).render(session)
    from gilty.load.run_diff import Row
    from gilty.report.compare import text as compare

    rows = [Row(**{f.name: r[f.name] for f in fields(Row)}) for r in data["rows"]]
    if fmt == "html":
        raise NotThisFormat("a compare report is written as text or JSON")
    return compare.render_text(data.get("a", "A"), data.get("b", "B"), data.get("compared", "recording"), rows)
