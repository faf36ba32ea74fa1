"""The asyncio event loops of a recording as `record`'s text section and `top`'s line (the words are
gilty.sampling.event_loops', which puts the verdict's sentence in every format). Sessions drawn here
are ``displayed`` ones: their names are already made visible."""

from __future__ import annotations

from typing import Optional

from gilty.sampling.analysis.wording import percent
from gilty.sampling.event_loops import app_frame, lags, spans, thread, where

CULPRITS_SHOWN = 3
# Culprits smaller than this share of the loop's time are left out of the text.
CULPRIT_MIN = 0.005


def section(session) -> list:
    """`record`'s lines on each event loop, with where its time away from the selector went."""
    out = []
    for lag in lags(session):
        out.append(f"Event loop of {thread(lag)}: away from its selector {percent(lag.lag_share)} of the time, in {spans(lag)}")
        for c in lag.culprits[:CULPRITS_SHOWN]:
            share = lag.share(c)
            if share >= CULPRIT_MIN:
                out.append(f"  {percent(share):>5}  {where(c)}, {c.doing}")
    return out


def top_line(session) -> Optional[str]:
    """`top`'s line on a process's most lagging loop over the last window (None without a loop)."""
    found = lags(session)
    if not found:
        return None
    lag = found[0]
    # Short enough for an 80-column frame: the thread is named only when it is not the main one.
    name = "" if lag.thread == "MainThread" else f" ({lag.thread})"
    if not lag.spans:
        return f"event loop{name}: at its selector, no span away over {lag.threshold_s * 1e3:g} ms"
    top = lag.culprits[0] if lag.culprits else None
    at = f": {app_frame(top)}" if top is not None else ""
    return f"event loop{name} {percent(lag.lag_share)} away, up to {lag.max_span_s * 1e3:.0f} ms{at}"
