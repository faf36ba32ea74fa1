"""One page of `gilty compare` of two recordings: the changes as a table and the differential flame graph."""

from __future__ import annotations

from gilty.load.run_diff import NOISE_METHOD
from gilty.report.compare.svg import diff_svg, drawn
from gilty.report.compare.text import figure, is_share


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
        change = "-" if r.change is None else figure(r.metric, r.change)
        if r.change is not None and r.change > 0 and not change.startswith("-"):
            change = "+" + change
        noise = "?" if r.noise is None else (">100 %" if is_share(r.metric) and r.noise >= 1.0 else figure(r.metric, r.noise))
        cls = ' class="beyond"' if r.beyond_noise else ""
        body.append(
            f"<tr{cls}><td class=name>{esc(r.scope)}</td><td class=name>{esc(r.metric)}</td>"
            f"<td>{esc(figure(r.metric, r.a))}</td><td>{esc(figure(r.metric, r.b))}</td><td>{esc(change)}</td>"
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


def render(c) -> str:
    return drawn(c, "html", lambda: diff_html(c.a, c.b, c.label_a, c.label_b, c.rows))
