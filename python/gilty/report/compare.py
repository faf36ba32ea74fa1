"""Text and JSON of `gilty compare`: the rows of figures A and B, their change and noise."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Optional

from gilty.load.run_diff import FORMAT_VERSION, LAG_HEADLINE, NOISE_METHOD, direction, is_large_within_noise, noise_unknown
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


def _is_share(metric: str) -> bool:
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
        out.append(f"{visible(r.scope)} {r.metric} {_fmt(r.metric, r.a)} → {_fmt(r.metric, r.b)}" + (f" ({how})" if how else ""))
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
        f"{visible(r.scope)} {r.metric}: {_fmt(r.metric, r.a)} → {_fmt(r.metric, r.b)} ({pct:+.0f} %) is within noise: "
        f"its noise is {_fmt(r.metric, r.noise)}, from {where}; repeat the runs (or run them longer) to tell"
    )


def render_text(label_a: str, label_b: str, kind: str, rows: list) -> str:
    lines = [f"gilty compare ({kind}): A = {visible(label_a, 0)}, B = {visible(label_b, 0)}", ""]
    lead = headline(rows)
    lines.append("Headline: " + ("; ".join(lead) if lead else "no figure differs beyond noise"))
    lines.append("")
    lines.append(f"  {'SCOPE':<44} {'METRIC':<16} {'A':>11} {'B':>11} {'CHANGE':>11} {'NOISE':>10}")
    for r in rows:
        change = "-" if r.change is None else _fmt(r.metric, r.change)
        if r.change is not None and r.change > 0 and not change.startswith("-"):
            change = "+" + change
        noise = "?" if r.noise is None else _fmt(r.metric, r.noise)
        if r.noise is not None and _is_share(r.metric) and r.noise >= 1.0:
            noise = ">100 %"  # a share cannot move more than all of it: "too noisy to tell"
        mark = f"  <- beyond noise{', ' + direction(r) if direction(r) else ''}" if r.beyond_noise else ""
        if noise_unknown(r):
            mark = "  <- ? noise unknown"
        scope = visible(r.scope)
        scope = scope if len(scope) <= 44 else scope[:43] + "~"
        lines.append(
            f"  {scope:<44} {r.metric:<16} {_fmt(r.metric, r.a):>11} {_fmt(r.metric, r.b):>11} {change:>11} {noise:>10}{mark}"
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


def render_json(label_a: str, label_b: str, kind: str, rows: list) -> str:
    return (
        json.dumps(
            {
                "format_version": FORMAT_VERSION,
                "kind": "compare",
                "compared": kind,
                "a": label_a,
                "b": label_b,
                "noise_method": NOISE_METHOD,
                "headline": headline(rows),
                "rows": [dict(asdict(r), direction=direction(r) or None, noise_unknown=noise_unknown(r)) for r in rows],
            },
            indent=2,
        )
        + "\n"
    )


# -- the differential flame graph (two recordings) -------------------------------------------


def diff_svg(a, b, label_a: str, label_b: str) -> str:
    """A differential flame graph drawn by inferno: B's stacks, widths of B (scaled to A's total),
    red where B spent more than A, blue where less; the tooltip gives the change."""
    from gilty.sampling import launch
    from gilty.sampling.analysis.difference import differential_lines

    lines = differential_lines(a, b)
    if not lines:
        raise ValueError("neither recording has a not-idle sample to draw")
    native = launch.native_module()
    subtitle = f"A = {label_a}, B = {label_b}; red: more time in B, blue: less; idle left out, lines ignored"
    return native.flamegraph_svg(lines, "gilty compare: differential flame graph", subtitle, "samples")


def diff_html(a, b, label_a: str, label_b: str, rows: list) -> str:
    """One page: the function and thread changes as a table, and the differential flame graph
    (the SVG inline, with its own script)."""
    import html as html_mod

    svg = diff_svg(a, b, label_a, label_b)
    # Inline, so that its own script (zoom, search, labels) runs in the page: the XML prologue goes.
    inline = svg[svg.index("<svg") :]
    esc = html_mod.escape
    body = []
    for r in rows:
        change = "-" if r.change is None else _fmt(r.metric, r.change)
        if r.change is not None and r.change > 0 and not change.startswith("-"):
            change = "+" + change
        noise = "?" if r.noise is None else (">100 %" if _is_share(r.metric) and r.noise >= 1.0 else _fmt(r.metric, r.noise))
        cls = ' class="beyond"' if r.beyond_noise else ""
        body.append(
            f"<tr{cls}><td class=name>{esc(r.scope)}</td><td class=name>{esc(r.metric)}</td>"
            f"<td>{esc(_fmt(r.metric, r.a))}</td><td>{esc(_fmt(r.metric, r.b))}</td><td>{esc(change)}</td>"
            f"<td>{esc(noise)}</td></tr>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gilty compare</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 16px 24px; color: #1d232a; }}
table {{ border-collapse: collapse; font-size: 13px; }} th, td {{ border: 1px solid #dde1e5; padding: 3px 8px; text-align: right; }}
td.name, th.name {{ text-align: left; }} tr.beyond td {{ background: #fdf2f2; font-weight: 600; }}
#diff-flamegraph {{ border: 1px solid #dde1e5; }} #diff-flamegraph > svg {{ width: 100%; height: auto; display: block; }}
</style></head><body>
<h1>gilty compare</h1>
<p>A = {esc(label_a)}<br>B = {esc(label_b)}</p>
<h2>Differential flame graph</h2>
<p>Widths are B's time (scaled to A's total); red frames took more of B's time than of A's, blue less.
Hover a frame for its change. Idle samples are left out; functions are matched without their line.</p>
<div id="diff-flamegraph">{inline}</div>
<h2>Figures</h2>
<p>Bold rows differ beyond noise ({esc(NOISE_METHOD)}).</p>
<table id="compare-rows"><thead><tr><th class=name>scope</th><th class=name>metric</th><th>A</th><th>B</th><th>change</th><th>noise</th></tr></thead>
<tbody>{"".join(body)}</tbody></table>
</body></html>
"""


# -- a Comparison (gilty.load.comparison), as the registry hands it ----------------------------


def render_comparison_text(c) -> str:
    return render_text(c.label_a, c.label_b, c.compared, c.rows)


def render_comparison_json(c) -> str:
    return render_json(c.label_a, c.label_b, c.compared, c.rows)


def _flame_graph(c, fmt: str, draw) -> str:
    from gilty._errors import EXIT_USAGE, CommandError

    if c.compared != "recording":
        raise CommandError(f"a differential flame graph ({fmt}) compares two recordings, not load runs", EXIT_USAGE)
    try:
        return draw()
    except ValueError as e:
        raise CommandError(f"cannot draw the differential flame graph: {e}", EXIT_USAGE) from None


def render_comparison_svg(c) -> str:
    return _flame_graph(c, "svg", lambda: diff_svg(c.a, c.b, c.label_a, c.label_b))


def render_comparison_html(c) -> str:
    return _flame_graph(c, "html", lambda: diff_html(c.a, c.b, c.label_a, c.label_b, c.rows))
