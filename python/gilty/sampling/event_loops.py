"""The asyncio event loops of a recording in words, for every report of a process that runs one: how
long each loop was away from its selector in spans over the threshold (gilty.load.eventloop, which
`gilty load` reads too) and the application code it was in meanwhile. The verdict leads with a loop
that is away most of the time, since every task of a blocked loop waits whatever the GIL and the CPUs
do; a blocking call in an async handler otherwise reads as an idle or CPU-starved process."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gilty.load.eventloop import Culprit, LoopLag
    from gilty.sampling.analysis.summary_model import Verdict

# A loop away from its selector this share of its time leads the verdict (as `gilty load` calls such a
# loop the limit: gilty.load.profile.LOOP_LAG_LIMIT_SHARE).
LEADS_VERDICT = 0.3
# Below that, still a sentence of the verdict (after the rest) from this share on.
NOTABLE = 0.1
VERDICT_KIND = "event_loop_blocked"
# gilty.sampling.analysis.verdict's sentence for an idle process, which a blocked loop contradicts.
IDLE_SENTENCE = "The process is mostly idle: its threads are blocked in system calls, not held up by the GIL."


def lags(session) -> list:
    """[LoopLag] of the session's asyncio loop threads, the most lagging first ([] for a session
    without a timeline, such as one loaded from an old report)."""
    if not getattr(session, "thread_runs", None) or not getattr(session, "times", None):
        return []
    from gilty.load import eventloop  # the load package imports this one's siblings: imported late

    return eventloop.loop_lags([session])


def short(label: str) -> str:
    """``fn (/srv/app/server.py:10)`` -> ``fn (server.py:10)``; a library file keeps its package
    (``get (requests/api.py)``), a standard-library one its path under the library."""
    head, sep, place = label.rpartition(" (")
    if not sep:
        return label
    for marker in ("site-packages/", "dist-packages/"):
        if marker in place:
            return f"{head} ({place.split(marker, 1)[1]}"
    if "/lib/python" in place:
        rest = place.split("/lib/python", 1)[1]
        return f"{head} ({rest.split('/', 1)[1] if '/' in rest else rest}"
    return f"{head} ({place.rsplit('/', 1)[-1]}"


def where(c: "Culprit") -> str:
    """``get (requests/api.py) called from fetch_price (server.py:10)``."""
    return short(c.site) + (f" called from {short(c.caller)}" if c.caller else "")


def app_frame(c: "Culprit") -> str:
    """The application's own frame of a culprit: its caller when the site is a library function
    (a library site is labelled by file only, without a line)."""
    in_library = ":" not in c.site.rpartition(" (")[2]
    return short(c.caller) if c.caller and in_library else short(c.site)


def spans(lag: "LoopLag") -> str:
    if not lag.spans:
        return f"no span away from it over {lag.threshold_s * 1e3:g} ms"
    noun = "span" if lag.spans == 1 else "spans"
    return f"{lag.spans} {noun} over {lag.threshold_s * 1e3:g} ms (up to {lag.max_span_s * 1e3:.0f} ms)"


def thread(lag: "LoopLag") -> str:
    return f"{lag.thread} (tid {lag.tid})"


def verdict_sentence(lag: "LoopLag") -> str:
    from gilty.sampling.analysis.wording import percent

    top = lag.culprits[0] if lag.culprits else None
    at = f", most of it in {where(top)}, {top.doing}" if top is not None else ""
    return (
        f"Event loop blocked: the event loop of {thread(lag)} was away from its selector {percent(lag.lag_share)} of "
        f"the time, in {spans(lag)}{at}; every task of that loop waits meanwhile."
    )


def with_event_loop(verdict: "Verdict", session) -> "Verdict":
    """``verdict`` with the most lagging loop's sentence first when it dominates, last when notable."""
    found = lags(session)
    if not found or found[0].lag_share < NOTABLE or verdict is None:
        return verdict
    sentence = verdict_sentence(found[0])
    leads = found[0].lag_share >= LEADS_VERDICT
    rest, kinds = verdict.text, list(verdict.kinds)
    if leads and "idle" in kinds:
        # Blocked in a system call inside a handler is not idle: that is the finding, said first.
        rest = rest.replace(IDLE_SENTENCE, "").strip()
        kinds.remove("idle")
    text = f"{sentence} {rest}" if leads else f"{rest} {sentence}"
    kinds = [VERDICT_KIND, *kinds] if leads else [*kinds, VERDICT_KIND]
    return type(verdict)(text.strip(), kinds)


def report(session) -> list:
    """The JSON report's ``event_loops``: one object per asyncio loop thread, the most lagging first."""
    return [
        {
            "pid": lag.pid,
            "tid": lag.tid,
            "thread": lag.thread,
            "threshold_s": lag.threshold_s,
            "away_share": round(lag.lag_share, 6),
            "at_rest_share": round(lag.at_rest, 6),
            "spans": lag.spans,
            "away_s": round(lag.lag_s, 6),
            "max_span_s": round(lag.max_span_s, 6),
            "culprits": [
                {
                    "site": c.site,
                    "caller": c.caller,
                    "doing": c.doing,
                    "seconds": round(c.seconds, 6),
                    "share": round(lag.share(c), 6),
                }
                for c in lag.culprits
            ],
        }
        for lag in lags(session)
    ]
