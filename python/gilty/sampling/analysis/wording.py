"""How numbers and threads are written in sentences, shared by the verdict and the console."""

from __future__ import annotations


def percent(fraction: float) -> str:
    """0.7412 -> '74%'; a non-zero share below 0.5% is '<1%' rather than a misleading '0%'."""
    if 0 < fraction < 0.005:
        return "<1%"
    return f"{round(fraction * 100)}%"


def percent_range(fractions: list) -> str:
    """'35%' when the rounded values agree, else '33-37%'."""
    low, high = percent(min(fractions)), percent(max(fractions))
    if low == high:
        return low
    return f"{low[:-1]}-{high}"


def milliseconds(seconds: float) -> str:
    """0.0051 -> '5.1 ms'; 0.005 -> '5 ms'."""
    ms = seconds * 1000.0
    if abs(ms - round(ms)) < 0.05:
        return f"{round(ms)} ms"
    return f"{ms:.1f} ms"


def quoted(name: str) -> str:
    return f"'{name}'"


def thread_label_from_name(name: str, tid: int) -> str:
    return f"'{name}' (tid {tid})"


def short_labels(threads: list) -> dict:
    """{tid: "'name'"} for threads (objects with .tid and .name); "'name' (tid N)" where the
    name is shared, as when every thread shows the process name because none was named."""
    seen: dict = {}
    for t in threads:
        seen[t.name] = seen.get(t.name, 0) + 1
    return {t.tid: quoted(t.name) if seen[t.name] == 1 else thread_label_from_name(t.name, t.tid) for t in threads}


def label_list(labels: list, limit: int = 3) -> str:
    """ "'a', 'b' and 4 more" — long lists are cut so a verdict stays one readable line."""
    shown = labels[:limit]
    if len(labels) > limit:
        return f"{', '.join(shown)} and {len(labels) - limit} more"
    return ", ".join(shown)
