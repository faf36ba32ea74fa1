"""One page of ``gilty memory``: the text report, and with --faults the flame graph of the writes
that copied pages shared with the master (widths in KiB copied)."""

from __future__ import annotations

import html as html_mod

from gilty.memory import faults
from gilty.memory.session import MemorySession
from gilty.report.memory import text
from gilty.sampling import launch


def _flame_graph(raw) -> str:
    s = faults.summary(raw)
    if s is None:
        return ""
    if not s["collapsed"]:
        return "<h2>Who copied shared pages</h2><p>No sampled fault copied a page shared with the master.</p>"
    svg = launch.native_module().flamegraph_svg(
        s["collapsed"],
        "gilty memory --faults: writes that copied shared pages",
        f"{s['copied_bytes'] / 2**20:.1f} MiB copied; frames under {faults.GC_FRAME} ran in a collection",
        "KiB",
    )
    # Inline, so that its own script (zoom, search) runs in the page: the XML prologue goes.
    return f'<h2>Who copied shared pages</h2><div id="faults-flamegraph">{svg[svg.index("<svg") :]}</div>'


def render(session: MemorySession) -> str:
    body = html_mod.escape(text.render(session))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gilty memory</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 16px 24px; color: #1d232a; }}
pre {{ font-size: 12px; }} #faults-flamegraph {{ border: 1px solid #dde1e5; }}
#faults-flamegraph > svg {{ width: 100%; height: auto; display: block; }}
</style></head><body>
<h1>gilty memory</h1>
{_flame_graph(session.faults)}
<h2>Report</h2>
<pre id="memory-text">{body}</pre>
</body></html>
"""
