"""Text and JSON of `gilty compare`: the rows of figures A and B, their change and noise."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Optional

from gilty.load.compare import FORMAT_VERSION, NOISE_METHOD, direction
from gilty.report.labels import visible


def _fmt(metric: str, v: Optional[float]) -> str:
    if v is None:
        return "-"
    if metric.endswith("_s"):
        return f"{v * 1e3:.1f} ms"
    if metric in ("throughput", "rate", "max_throughput", "pss_mib"):
        return f"{v:.1f}"
    if metric == "server_threads":
        return f"{v:.2f}"
    return f"{v * 100:.1f} %"


def render_text(label_a: str, label_b: str, kind: str, rows: list) -> str:
    lines = [f"gilty compare ({kind}): A = {visible(label_a, 0)}, B = {visible(label_b, 0)}", ""]
    lines.append(f"  {'SCOPE':<44} {'METRIC':<16} {'A':>11} {'B':>11} {'CHANGE':>11} {'NOISE':>10}")
    for r in rows:
        change = "-" if r.change is None else _fmt(r.metric, r.change)
        if r.change is not None and r.change > 0 and not change.startswith("-"):
            change = "+" + change
        noise = "?" if r.noise is None else _fmt(r.metric, r.noise)
        mark = f"  <- beyond noise{', ' + direction(r) if direction(r) else ''}" if r.beyond_noise else ""
        lines.append(f"  {visible(r.scope):<44} {r.metric:<16} {_fmt(r.metric, r.a):>11} {_fmt(r.metric, r.b):>11} {change:>11} {noise:>10}{mark}")
    lines.append("")
    lines.append(f"Noise: {NOISE_METHOD}; '?' where it cannot be estimated (never flagged).")
    flagged = [r for r in rows if r.beyond_noise]
    lines.append(f"{len(flagged)} of {len(rows)} figures differ beyond noise.")
    return "\n".join(lines) + "\n"


def render_json(label_a: str, label_b: str, kind: str, rows: list) -> str:
    return json.dumps({
        "format_version": FORMAT_VERSION,
        "kind": "compare",
        "compared": kind,
        "a": label_a,
        "b": label_b,
        "noise_method": NOISE_METHOD,
        "rows": [dict(asdict(r), direction=direction(r) or None) for r in rows],
    }, indent=2) + "\n"
