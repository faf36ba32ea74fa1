"""The text of `gilty compare`: the rows of figures A and B, their change and noise (the figures'
wording here is the JSON's headline and the page's table too)."""

from __future__ import annotations

from typing import Optional

from gilty.load.run_diff import LAG_HEADLINE, NOISE_METHOD, direction, is_large_within_noise, noise_unknown
from gilty.report.labels import visible


def figure(metric: str, v: Optional[float]) -> str:
    if v is None:
        return "-"
    if metric.endswith("_s"):
        return f"{v * 1e3:.1f} ms"
    if metric in ("throughput", "rate", "max_throughput", "pss_mib"):
        return f"{v:.1f}"
    if metric == "server_threads":
        return f"{v:.2f}"
    return f"{v * 100:.1f} %"


def is_share(metric: str) -> bool:
    return not metric.endswith("_s") and metric not in ("throughput", "rate", "max_throughput", "pss_mib", "server_threads")


def _knee_rate(v: Optional[float]) -> str:
    return "below the first step" if v is None else f"{v:g}"


def _user_facing(metric: str) -> bool:
    return metric.startswith("p") and metric.endswith("_s") or metric in ("throughput", "max_throughput")


def headline(rows: list) -> list:
    """The changes that matter, first: the knee, an event loop's lag, then the largest changes beyond
    noise (their direction said); empty when nothing changed."""
    out = []
    knee = next((r for r in rows if r.scope == "knee" and r.metric == "rate"), None)
    if knee is not None and knee.a != knee.b:
        better = (knee.b or 0.0) > (knee.a or 0.0)
        out.append(f"knee {_knee_rate(knee.a)} → {_knee_rate(knee.b)} rps ({'better' if better else 'worse'})")
    lags = [r for r in rows if r.metric == "lag_share" and r.change is not None and abs(r.change) >= LAG_HEADLINE]
    if lags:
        r = max(lags, key=lambda r: abs(r.change))
        step, _sep, thread = r.scope.partition(" loop ")
        out.append(
            f"loop lag of {visible(thread)} at {step.removeprefix('step ')} {r.a * 100:.0f} % → {r.b * 100:.0f} % "
            f"({direction(r, judged=False)})"
        )
    rest = [r for r in rows if r.beyond_noise and r is not knee and r.metric != "lag_share"]
    # what the users of the service feel (latency, throughput) leads; the server's inner figures explain it after
    rest.sort(key=lambda r: (not _user_facing(r.metric), -abs(r.change) / max(abs(r.a), abs(r.b), 1e-12)))
    for r in rest[: 3 - min(2, len(out))]:
        how = direction(r)
        out.append(
            f"{visible(r.scope)} {r.metric} {figure(r.metric, r.a)} → {figure(r.metric, r.b)}" + (f" ({how})" if how else "")
        )
    return out


def _why_noise(r) -> str:
    """Why a large change is called noise: its noise is larger, and where that noise comes from."""
    where = (
        "the counting noise of its samples"
        if " endpoint " in r.scope or r.scope.startswith("function ")
        else "how much each run's own seconds differ from one another (few seconds widen it further)"
    )
    pct = 100 * r.change / max(abs(r.a), abs(r.b))
    return (
        f"{visible(r.scope)} {r.metric}: {figure(r.metric, r.a)} → {figure(r.metric, r.b)} ({pct:+.0f} %) is within noise: "
        f"its noise is {figure(r.metric, r.noise)}, from {where}; repeat the runs (or run them longer) to tell"
    )


def render_text(label_a: str, label_b: str, kind: str, rows: list) -> str:
    lines = [f"gilty compare ({kind}): A = {visible(label_a, 0)}, B = {visible(label_b, 0)}", ""]
    lead = headline(rows)
    lines.append("Headline: " + ("; ".join(lead) if lead else "no figure differs beyond noise"))
    lines.append("")
    lines.append(f"  {'SCOPE':<44} {'METRIC':<16} {'A':>11} {'B':>11} {'CHANGE':>11} {'NOISE':>10}")
    for r in rows:
        change = "-" if r.change is None else figure(r.metric, r.change)
        if r.change is not None and r.change > 0 and not change.startswith("-"):
            change = "+" + change
        noise = "?" if r.noise is None else figure(r.metric, r.noise)
        if r.noise is not None and is_share(r.metric) and r.noise >= 1.0:
            noise = ">100 %"  # a share cannot move more than all of it: "too noisy to tell"
        mark = f"  <- beyond noise{', ' + direction(r) if direction(r) else ''}" if r.beyond_noise else ""
        if noise_unknown(r):
            mark = "  <- ? noise unknown"
        scope = visible(r.scope)
        scope = scope if len(scope) <= 44 else scope[:43] + "~"
        lines.append(
            f"  {scope:<44} {r.metric:<16} {figure(r.metric, r.a):>11} {figure(r.metric, r.b):>11} {change:>11} {noise:>10}{mark}"
        )
    lines.append("")
    lines.append(
        f"Noise: {NOISE_METHOD}; '?' where it cannot be estimated (one reading per run): a change there is marked "
        "'? noise unknown', neither beyond nor within noise."
    )
    flagged = [r for r in rows if r.beyond_noise]
    unknown = [r for r in rows if noise_unknown(r)]
    within = len(rows) - len(flagged) - len(unknown)
    lines.append(
        f"{len(flagged)} of {len(rows)} figures differ beyond noise; {len(unknown)} changed with their noise unknown (?); "
        f"{within} within noise."
    )
    for r in [r for r in rows if is_large_within_noise(r)][:3]:
        lines.append(f"Within noise although large: {_why_noise(r)}.")
    return "\n".join(lines) + "\n"


def render(c) -> str:
    """A ``load.comparison.Comparison``."""
    return render_text(c.label_a, c.label_b, c.compared, c.rows)
