"""A summary's threads with each pool (``pools.group_pools``: "ThreadPoolExecutor-0_0" .. "_7",
"uWSGIWorker1Core*", "asyncio_*") merged into one ThreadSummary, as the text report shows them: eight
rows of the same numbers say less than one row with the pool's sum.

A pool's summary sums its members' samples, so its shares are the average over its threads weighted
by samples; its tid is its first member's. Who held the GIL during a wait is named by pool too.
"""

from __future__ import annotations

import dataclasses

from gilty.sampling.analysis.blame import BlameShare
from gilty.sampling.analysis.convoy import ConvoyStats
from gilty.sampling.analysis.functions import TOP_FUNCTIONS_PER_STATE, FunctionShare, most_frequent
from gilty.sampling.analysis.pools import Pool, group_pools
from gilty.sampling.analysis.states import ThreadStates
from gilty.sampling.analysis.summary_model import Summary, ThreadSummary
from gilty.sampling.thread_states import STATE_NAMES

BLAME_ENTRIES = 10  # a merged pool's blame list, as long as a thread's


def thread_pools(summary: Summary) -> list:
    """The summary's threads grouped into Pools (members: ThreadSummary), in the summary's order."""
    return group_pools(
        summary.threads, name_of=lambda t: t.name, tid_of=lambda t: t.tid, counts_of=lambda t: t.states.table_counts()
    )


def pooled_summary(summary: Summary) -> Summary:
    """``summary`` with each pool's threads as one ThreadSummary (the same summary when none is)."""
    pools = thread_pools(summary)
    if all(p.size == 1 for p in pools):
        return summary
    pool_of = {tid: p for p in pools for tid in p.tids}
    threads = [_single(p.members[0], pool_of) if p.size == 1 else _merged(p, pool_of) for p in pools]
    return dataclasses.replace(summary, threads=threads)


def _single(t: ThreadSummary, pool_of: dict) -> ThreadSummary:
    """A thread of its own, whose waits name the pools that held the GIL."""
    blame_counts, blame = _blame([t], pool_of)
    return dataclasses.replace(t, blame_counts=blame_counts, blame=blame)


def _weighted(dicts: list, weights: list, total: int) -> dict:
    out: dict = {}
    for d, w in zip(dicts, weights):
        for key, share in d.items():
            out[key] = out.get(key, 0.0) + share * w / total
    return dict(sorted(out.items(), key=lambda item: -item[1]))


def _functions(members: list, total: int) -> list:
    merged: dict = {}  # (state, function, file) -> [samples, {line: samples}, handling]
    for t in members:
        for f in t.top_functions:
            entry = merged.setdefault((f.state, f.function, f.file), [0, {}, 0])
            entry[0] += f.samples
            entry[1][f.line] = entry[1].get(f.line, 0) + f.samples
            entry[2] += f.handling_samples
    # States in code order, as a thread's own list; its largest functions first within each.
    ranked = sorted(merged.items(), key=lambda item: (_order(item[0][0]), -item[1][0], str(item[0][1:])))
    shown: dict = {}
    out = []
    for (state, function, file), (n, lines, handling) in ranked:
        shown[state] = shown.get(state, 0) + 1
        if shown[state] <= TOP_FUNCTIONS_PER_STATE:
            out.append(FunctionShare(function, file, most_frequent(lines), state, n, n / total if total else 0.0, handling))
    return out


def _order(state: str) -> int:
    return STATE_NAMES.index(state) if state in STATE_NAMES else len(STATE_NAMES)


def _blame(members: list, pool_of: dict) -> tuple:
    """(blame_counts with holders named by their pool's first tid, [BlameShare] of the largest)."""
    counts: dict = {}
    for t in members:
        for (holder, function, file), (n, lines) in t.blame_counts.items():
            pool = pool_of.get(holder)
            key = (pool.tids[0] if pool is not None else holder, function, file)
            entry = counts.setdefault(key, [0, {}])
            entry[0] += n
            for line, k in lines.items():
                entry[1][line] = entry[1].get(line, 0) + k
    waited = sum(n for n, _lines in counts.values())
    shares = []
    for (holder, function, file), (n, lines) in sorted(counts.items(), key=lambda item: -item[1][0])[:BLAME_ENTRIES]:
        pool = pool_of.get(holder)
        name = pool.name if pool is not None else ""
        shares.append(
            BlameShare(holder, name, function, file, most_frequent(lines) if lines else None, n, n / waited if waited else 0.0)
        )
    return {k: (n, lines) for k, (n, lines) in counts.items()}, shares


def _convoy(members: list) -> ConvoyStats:
    stats = [t.convoy for t in members]
    episodes = sum(c.episodes for c in stats)
    total = sum(c.total_wait_s for c in stats)
    mean = total / episodes if episodes else None
    ratios = [(c.switch_intervals, c.episodes) for c in stats if c.switch_intervals is not None and c.episodes]
    intervals = sum(r * n for r, n in ratios) / sum(n for _r, n in ratios) if ratios else None
    return ConvoyStats(
        episodes=episodes,
        waiting_samples=sum(c.waiting_samples for c in stats),
        total_wait_s=total,
        mean_wait_s=mean,
        switch_intervals=intervals,
        is_convoy=any(c.is_convoy for c in stats),
        resolution_limited=any(c.resolution_limited for c in stats if c.episodes),
        wakeups=sum(c.wakeups for c in stats),
    )


def _merged(pool: Pool, pool_of: dict) -> ThreadSummary:
    members = pool.members
    samples = [t.samples for t in members]
    total = sum(samples)
    counts = [sum(c) for c in zip(*(t.states.counts for t in members))]
    states = ThreadStates(pool.tids[0], total, counts, sum(t.states.held_cpu_wait for t in members))
    blame_counts, blame = _blame(members, pool_of)
    return ThreadSummary(
        tid=pool.tids[0],
        name=pool.name,
        states=states,
        idle_syscalls=_weighted([t.idle_syscalls for t in members], samples, total),
        idle_kinds=_weighted([t.idle_kinds for t in members], samples, total),
        top_functions=_functions(members, total),
        blame=blame,
        convoy=_convoy(members),
        blame_counts=blame_counts,
        handling_samples=sum(t.handling_samples for t in members),
        size=pool.size,
    )
