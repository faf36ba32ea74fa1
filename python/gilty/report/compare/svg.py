"""The differential flame graph of two recordings, drawn by inferno (`gilty compare -o diff.svg`)."""

from __future__ import annotations


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


def drawn(c, fmt: str, draw) -> str:
    """The differential flame graph of two recordings; of load runs, or of nothing to draw, one line."""
    from gilty._errors import EXIT_USAGE, CommandError

    if c.compared != "recording":
        raise CommandError(f"a differential flame graph ({fmt}) compares two recordings, not load runs", EXIT_USAGE)
    try:
        return draw()
    except ValueError as e:
        raise CommandError(f"cannot draw the differential flame graph: {e}", EXIT_USAGE) from None


def render(c) -> str:
    return drawn(c, "svg", lambda: diff_svg(c.a, c.b, c.label_a, c.label_b))
