"""Everything the renderers show, computed once from a Session."""

from __future__ import annotations

from gilty.sampling.analysis.blame import BlameShare, blame, blame_counts
from gilty.sampling.analysis.convoy import ConvoyStats, convoys
from gilty.sampling.analysis.exact import summarise_exact
from gilty.sampling.analysis.functions import FunctionShare, error_path_counts, top_functions
from gilty.sampling.analysis.saturation import saturation
from gilty.sampling.analysis.states import (
    gc_share,
    gil_utilisation,
    idle_syscalls,
    mean_waiting_threads,
    thread_states,
)
from gilty.sampling.analysis.summary_model import Summary, ThreadSummary, Verdict  # noqa: F401 - re-exported
from gilty.sampling.analysis.syscalls import idle_kind
from gilty.sampling.analysis.verdict import verdict
from gilty.sampling.event_loops import with_event_loop
from gilty.sampling.session import Session


def handling_samples(session: Session, tid: int) -> int:
    """Samples in which the thread handled an exception outside a wait (``error_path_counts``)."""
    return sum(n for (t, _state, _stack), n in error_path_counts(session).items() if t == tid)


def _idle_kinds(syscalls: dict) -> dict:
    kinds: dict = {}
    for name, fraction in syscalls.items():
        kind = idle_kind(name)
        kinds[kind] = kinds.get(kind, 0.0) + fraction
    return dict(sorted(kinds.items(), key=lambda item: -item[1]))


def summarise(session: Session) -> Summary:
    """Run every analysis over ``session``."""
    states = thread_states(session)
    idle = idle_syscalls(session, states)
    functions = top_functions(session, states)
    counts = blame_counts(session)
    blamed = blame(session, counts=counts)
    convoy = convoys(session)
    threads = [
        ThreadSummary(
            tid=tid,
            name=session.thread_name(tid),
            states=st,
            idle_syscalls=idle.get(tid, {}),
            idle_kinds=_idle_kinds(idle.get(tid, {})),
            top_functions=functions.get(tid, []),
            blame=blamed.get(tid, []),
            convoy=convoy[tid],
            blame_counts=counts.get(tid, {}),
            handling_samples=handling_samples(session, tid),
        )
        for tid, st in states.items()
    ]
    threads.sort(key=lambda t: (-t.states.holding, t.tid))
    summary = Summary(
        session=session,
        gil_utilisation=gil_utilisation(session),
        gc_share=gc_share(session),
        mean_waiting_threads=mean_waiting_threads(session),
        threads=threads,
        exact=summarise_exact(session),
        saturation=saturation(session),
    )
    # An event loop kept from its selector leads every format's verdict (gilty.sampling.event_loops).
    summary.verdict = with_event_loop(verdict(summary), session)
    return summary


__all__ = ["BlameShare", "ConvoyStats", "FunctionShare", "Summary", "ThreadSummary", "Verdict", "summarise"]
