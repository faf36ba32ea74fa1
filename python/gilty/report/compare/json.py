"""The JSON report of `gilty compare`, which `gilty report` reads back."""

from __future__ import annotations

import json
from dataclasses import asdict

from gilty.load.run_diff import FORMAT_VERSION, NOISE_METHOD, direction, noise_unknown
from gilty.report.compare.text import headline


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


def render(c) -> str:
    return render_json(c.label_a, c.label_b, c.compared, c.rows)
