"""The asyncio event loops of a recording in words: how long each loop was away from its selector (in
spans over the threshold: gilty.load.eventloop) and the application code it was in meanwhile. Every
text report of a process that runs a loop says this; the verdict leads with it when it dominates,
since every task of a blocked loop waits whatever the GIL and the CPUs do."""

from __future__ import annotations

from typing import Optional

from gilty.load import eventloop
from gilty.report.labels import visible
from gilty.sampling.analysis.wording import percent

# A loop away from its selector this share of its time leads the verdict (as `gilty load` calls such a
# loop the limit: gilty.load.profile.LOOP_LAG_LIMIT_SHARE).
LEADS_VERDICT = 0.3
# Below that, still a sentence of the verdict from this share on.
NOTABLE = 0.1
CULPRITS_SHOWN = 3
# Culprits smaller than this share of the loop's time are left out of the text.
CULPRIT_MIN = 0.005


def _short(label: str) -> str:
    """``fn (/srv/app/server.py:10)`` -> ``fn (server.py:10)``; a library file keeps its package
    (``get (requests/api.py)``)."""
    head, sep, place = label.rpartition(" (")
    if not sep:
        return visible(label)
    for marker in ("site-packages/", "dist-packages/"):
        if marker in place:
            return visible(f"{head} ({place.split(marker, 1)[1]}")
    if "/lib/python" in place:
        rest = place.split("/lib/python", 1)[1]
        return visible(f"{head} ({rest.split('/', 1)[1] if '/' in rest else rest}")
    return visible(f"{head} ({place.rsplit('/', 1)[-1]}")


def _where(c: eventloop.Culprit) -> str:
    return _short(c.site) + (f" called from {_short(c.caller)}" if c.caller else "")


def app_frame(c: eventloop.Culprit) -> str:
    """The application's own frame of a culprit: its caller when the site is a library function."""
    return _short(c.caller) if c.caller and "(" in c.site and ":" not in c.site.rsplit("(", 1)[1] else _short(c.site)


def lags(session) -> list:
    """[LoopLag] of the session's asyncio loop threads, the most lagging first."""
    if not getattr(session, "thread_runs", None):
        return []
    return eventloop.loop_lags([session])


def _spans(lag: eventloop.LoopLag) -> str:
    if not lag.spans:
        return f"no span away from it over {lag.threshold_s * 1e3:g} ms"
    spans = "span" if lag.spans == 1 else "spans"
    return f"{lag.spans} {spans} over {lag.threshold_s * 1e3:g} ms (up to {lag.max_span_s * 1e3:.0f} ms)"


def _thread(lag: eventloop.LoopLag) -> str:
    return f"{visible(lag.thread)} (tid {lag.tid})"


def section(session) -> list:
    """`record`'s lines on each event loop, with where its lag went."""
    out = []
    for lag in lags(session):
        out.append(f"Event loop of {_thread(lag)}: away from its selector {percent(lag.lag_share)} of the time, in {_spans(lag)}")
        for c in lag.culprits[:CULPRITS_SHOWN]:
            share = lag.share(c)
            if share >= CULPRIT_MIN:
                out.append(f"  {percent(share):>5}  {_where(c)}, {c.doing}")
    return out


def verdict_sentence(session) -> tuple:
    """(sentence, leads): the verdict's words on the most lagging loop, and whether they come first;
    ("", False) when no loop lags notably."""
    found = lags(session)
    if not found or found[0].lag_share < NOTABLE:
        return "", False
    lag = found[0]
    top = lag.culprits[0] if lag.culprits else None
    where = f", most of it in {_where(top)}, {top.doing}" if top is not None else ""
    return (
        f"Event loop blocked: the event loop of {_thread(lag)} was away from its selector {percent(lag.lag_share)} of the "
        f"time, in {_spans(lag)}{where}; every task of that loop waits meanwhile.",
        lag.lag_share >= LEADS_VERDICT,
    )


def top_line(session) -> Optional[str]:
    """`top`'s line on a process's most lagging loop over the last window (None without a loop)."""
    found = lags(session)
    if not found:
        return None
    lag = found[0]
    # Short enough for an 80-column frame: the thread is named only when it is not the main one.
    thread = "" if lag.thread == "MainThread" else f" ({visible(lag.thread)})"
    if not lag.spans:
        return f"event loop{thread}: at its selector, no span away over {lag.threshold_s * 1e3:g} ms"
    top = lag.culprits[0] if lag.culprits else None
    where = f": {app_frame(top)}" if top is not None else ""
    return f"event loop{thread} {percent(lag.lag_share)} away, up to {lag.max_span_s * 1e3:.0f} ms{where}"
