"""A few plain sentences saying whether the GIL is the problem, and if so whose fault it is."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from gilty.sampling.analysis.convoy import RESOLVED_SAMPLES_PER_EPISODE
from gilty.sampling.analysis.functions import most_frequent
from gilty.sampling.analysis.pools import group_pools
from gilty.sampling.analysis.summary_model import Verdict
from gilty.sampling.analysis.wording import label_list, milliseconds, percent, percent_range, short_labels, thread_label_from_name
from gilty.sampling.native_frames import frame_text
from gilty.sampling.session import CPU_WAIT, GC, IDLE, NATIVE, UNKNOWN, WAITING_GIL

if TYPE_CHECKING:
    from gilty.sampling.analysis.summary_model import Summary, ThreadSummary

# A thread waiting for the GIL this share of its samples or more is slowed by it noticeably.
WAITER_MIN = 0.05
# The collector holding the GIL this share of all passes is worth a sentence of its own.
GC_NOTABLE = 0.10
# A thread running native code without the GIL at least this share of its samples.
NATIVE_DOMINANT = 0.5
# Every thread idle at least this share, with the GIL mostly free: nothing to speed up here.
IDLE_DOMINANT = 0.9
UNKNOWN_NOTABLE = 0.2
# A holder's top function is named alone when it covers this much of the holder's share.
FUNCTION_DOMINANT = 0.8
# Fewer passes than this and the percentages are too coarse to lean on.
FEW_SAMPLES = 100


class _Labels(dict):
    """{tid: "'name'"} that also names lists of threads with each pool once: "'ThreadPoolExecutor-0_#'
    (8 threads)" rather than eight names, of which a sentence shows three "and 6 more"."""

    def __init__(self, threads: list) -> None:
        super().__init__(short_labels(threads))
        pools = group_pools(threads, name_of=lambda t: t.name, tid_of=lambda t: t.tid, counts_of=lambda t: t.states.counts)
        # Numbered pools only: threads that share one name (unnamed ones read as the process) stay
        # told apart by tid.
        self.pool_of = {tid: p.label for p in pools if len({t.name for t in p.members}) > 1 for tid in p.tids}

    def names(self, threads: list) -> str:
        groups: dict = {}  # pool label, or a tid of its own -> tids, in first-seen order
        for t in threads:
            groups.setdefault(self.pool_of.get(t.tid, t.tid), []).append(t.tid)
        parts = [self[tids[0]] if len(tids) == 1 else f"'{key}' ({len(tids)} threads)" for key, tids in groups.items()]
        return label_list(parts)


def _contention(summary: "Summary", waiters: list, labels: dict) -> str:
    """Who waits for the GIL, and while whom holds it (from the same sampling passes)."""
    by_holder: Counter = Counter()
    for t in waiters:
        for (holder, _function, _file), (n, _lines) in t.blame_counts.items():
            by_holder[holder] += n
    named = [(tid, n) for tid, n in by_holder.most_common() if tid is not None]
    total_wait = sum(by_holder.values()) or 1
    waits = [t.states.fraction(WAITING_GIL) for t in waiters]
    subject = "Thread" if len(waiters) == 1 else "Threads"
    verb = "waits" if len(waiters) == 1 else "wait"
    their = "its" if len(waiters) == 1 else "their"
    names = labels.names(waiters)
    waiting = f"{subject} {names} {verb} for the GIL {percent_range(waits)} of {their} time"

    if by_holder[None] > total_wait / 2 or not named:
        return f"{waiting}, but in most of those samples no thread was seen holding it (GIL hand-offs in progress)."
    sat = summary.saturation
    if sat is not None and sat.holder_cpu_wait_share >= WAITER_MIN:
        # The GIL is held, but its holder has no CPU to run on: the wait is the host's as much as the GIL's.
        waiting += f" (in {percent(sat.holder_cpu_wait_share)} of all passes the holder itself was waiting for a CPU)"

    holder_tid = named[0][0]
    # Shares are of the other waiters' waits: a holder never blames itself.
    others = [t for t in waiters if t.tid != holder_tid]
    held: Counter = Counter()  # (function, file, line) of the holder -> samples
    others_wait = 0
    for t in others:
        for (holder, function, file), (n, lines) in t.blame_counts.items():
            others_wait += n
            if holder == holder_tid:
                held[(function, file, most_frequent(lines))] += n
    holder_share = sum(held.values()) / (others_wait or 1)

    if holder_share < 0.5:
        # Nobody dominates: list the biggest holders instead of blaming one.
        # A pool's threads taking turns are one holder here: its share, not three of its threads'.
        by_group: Counter = Counter()
        for tid, n in named:
            by_group[labels.pool_of.get(tid, tid)] += n
        top = ", ".join(
            (
                f"'{key}' ({sum(1 for p in labels.pool_of.values() if p == key)} threads)"
                if key in labels.pool_of.values()
                else labels.get(key, thread_label_from_name(summary.session.thread_name(key), key))
            )
            + f" {percent(n / total_wait)}"
            for key, n in by_group.most_common(3)
        )
        return f"{waiting}; no single thread holds it most of that time (largest holders: {top})."

    holder = summary.thread(holder_tid)
    holder_name = holder.name if holder else summary.session.thread_name(holder_tid)
    holder_hold = holder.states.holding / holder.samples if holder and holder.samples else 0.0
    holder_short = labels.get(holder_tid, thread_label_from_name(holder_name, holder_tid))
    waits = [t.states.fraction(WAITING_GIL) for t in others]
    if len(others) == 1:
        who = f"thread {labels[others[0].tid]} waits for it {percent_range(waits)} of its time"
    else:
        who = f"threads {labels.names(others)} wait for it {percent_range(waits)} of their time"

    # Name the holder's function when it accounts for most of the holder's share, as in
    # "while 'metrics' runs spin() (app.py:12)"; else give both shares.
    where = f"while {holder_short} holds it"
    share = holder_share
    (function, file, line), function_samples = held.most_common(1)[0]
    function_share = function_samples / (others_wait or 1)
    if function is not None:
        location = frame_text(f"{function}()", file or "", line, short=True)
        if function_share >= FUNCTION_DOMINANT * holder_share:
            where = f"while {holder_short} runs {location}"
            share = function_share
        else:
            where += f" ({percent(function_share)} in {location})"
    return (
        f"Thread {thread_label_from_name(holder_name, holder_tid)} holds the GIL {percent(holder_hold)} of the time; "
        f"{who}, {percent(share)} of that {where}."
    )


def _convoy(convoy_threads: list, labels: dict, switch_interval_s: float, rate_hz: float) -> str:
    episodes = sum(t.convoy.episodes for t in convoy_threads)
    mean = sum(t.convoy.total_wait_s for t in convoy_threads) / episodes
    samples = sum(t.convoy.waiting_samples for t in convoy_threads)
    verb = "waits" if len(convoy_threads) == 1 else "wait"
    ratio = mean / switch_interval_s
    if 0.75 <= ratio < 1.5:
        intervals = "about one switch interval"
    else:
        intervals = f"about {ratio:.1f} switch intervals"
    # Sampling sees long waits more often than short ones and counts each seen pass as a whole
    # period, so with few samples per episode the mean is an over-estimate: say so.
    limited = samples / episodes < RESOLVED_SAMPLES_PER_EPISODE
    text = (
        f"Convoy: {labels.names(convoy_threads)} {verb} {'up to ' if limited else ''}"
        f"{milliseconds(mean)} per wake-up from a blocking call, {intervals} ({milliseconds(switch_interval_s)})"
    )
    if limited:
        text += f"; {rate_hz:g} Hz sampling over-estimates waits this short, record with --rate 1000 to measure them"
    return text + "."


def _native(native_threads: list, labels: dict) -> str:
    def where(t: "ThreadSummary") -> str:
        top = next((f for f in t.top_functions if f.state == "native" and f.function is not None), None)
        if top is None:
            return ""
        return f" (mostly under {frame_text(f'{top.function}()', top.file or '', top.line, short=True)})"

    if len(native_threads) == 1:
        t = native_threads[0]
        share = percent(t.states.fraction(NATIVE))
        return f"Native code: {labels[t.tid]} runs native code without the GIL {share} of its time{where(t)}."
    parts = [f"{labels[t.tid]} {percent(t.states.fraction(NATIVE))}{where(t)}" for t in native_threads[:3]]
    more = f" and {len(native_threads) - 3} more" if len(native_threads) > 3 else ""
    return f"Native code: threads run native code without the GIL most of their time: {', '.join(parts)}{more}."


def _gc(summary: "Summary", labels: dict) -> str:
    in_gc = [t for t in summary.threads if t.states.counts[GC]]
    in_gc.sort(key=lambda t: -t.states.counts[GC])
    mostly = f", mostly in thread {labels[in_gc[0].tid]}" if in_gc else ""
    return f"Garbage collection holds the GIL {percent(summary.gc_share)} of the time{mostly}."


def _cpu_starved(summary: "Summary", starved: list, labels: dict) -> str:
    sat = summary.saturation
    line = f" ({sat.line()})" if sat is not None else ""
    if starved:
        shares = percent_range([t.states.fraction(CPU_WAIT) for t in starved])
        one = len(starved) == 1
        who = f"{'Thread' if one else 'Threads'} {labels.names(starved)} {'waits' if one else 'wait'}"
        return (
            f"CPU starved: {who} for a CPU {shares} of {'its' if one else 'their'} time{line}; "
            "that time is neither GIL contention nor native code."
        )
    return f"CPU starved{line}."


def verdict(summary: "Summary") -> "Verdict":

    session = summary.session
    if summary.samples == 0 or not summary.threads:
        return Verdict("No samples were recorded.", ["empty"])

    sentences: list = []
    kinds: list = []
    threads = summary.threads
    labels = _Labels(threads)
    # Runnable threads without a CPU: the host or the cgroup's quota, not the GIL. The larger finding
    # is said first: starvation before contention only when some thread loses more time to it than
    # any thread loses waiting for the GIL (a busy 2-CPU host costs every thread a few percent).
    starved = sorted(
        (t for t in threads if t.states.fraction(CPU_WAIT) >= WAITER_MIN),
        key=lambda t: (-t.states.fraction(CPU_WAIT), t.tid),
    )
    waiters = sorted(
        (t for t in threads if t.states.fraction(WAITING_GIL) >= WAITER_MIN),
        key=lambda t: (-t.states.fraction(WAITING_GIL), t.tid),
    )
    starvation = None
    if starved or (summary.saturation is not None and summary.saturation.saturated):
        kinds.append("cpu_starved")
        starvation = _cpu_starved(summary, starved, labels)
        worst_cpu_wait = starved[0].states.fraction(CPU_WAIT) if starved else 0.0
        if not waiters or worst_cpu_wait > waiters[0].states.fraction(WAITING_GIL):
            sentences.append(starvation)
            starvation = None
    if waiters:
        kinds.append("contention")
        sentences.append(_contention(summary, waiters, labels))
        if starvation is not None:
            sentences.append(starvation)
    else:
        kinds.append("no_contention")
        most = max(t.states.fraction(WAITING_GIL) for t in threads)
        text = (
            f"No GIL contention: the GIL is busy {percent(summary.gil_utilisation)} of the time and no thread "
            f"waits for it more than {percent(most)} of its time"
        )
        # Threads held up all the same: say by what, so "no contention" does not read as "all is well".
        sentences.append(text + ("; the time lost is spent waiting for a CPU." if "cpu_starved" in kinds else "."))

    # Most episodes first: the threads that keep waking into a GIL wait are the convoy's victims.
    convoy_threads = sorted((t for t in threads if t.convoy.is_convoy), key=lambda t: (-t.convoy.episodes, t.tid))
    if convoy_threads:
        kinds.append("convoy")
        sentences.append(_convoy(convoy_threads, labels, session.target.switch_interval_s, session.rate_hz))

    if summary.gc_share >= GC_NOTABLE:
        kinds.append("gc")
        sentences.append(_gc(summary, labels))

    native_threads = sorted(
        (t for t in threads if t.states.fraction(NATIVE) >= NATIVE_DOMINANT),
        key=lambda t: (-t.states.fraction(NATIVE), t.tid),
    )
    if native_threads:
        kinds.append("native")
        sentences.append(_native(native_threads, labels))

    if (
        not waiters
        and summary.gil_utilisation < 1 - IDLE_DOMINANT
        and all(t.states.fraction(IDLE) >= IDLE_DOMINANT for t in threads)
    ):
        kinds.append("idle")
        sentences.append("The process is mostly idle: its threads are blocked in system calls, not held up by the GIL.")

    unknown = sum(t.states.counts[UNKNOWN] for t in threads) / sum(t.samples for t in threads)
    if unknown >= UNKNOWN_NOTABLE:
        kinds.append("unknown")
        sentences.append(f"{percent(unknown)} of thread samples could not be classified; read the figures with care.")

    if summary.samples < FEW_SAMPLES:
        kinds.append("few_samples")
        sentences.append(f"Only {summary.samples} samples: record longer for firmer numbers.")

    return Verdict(" ".join(sentences), kinds)
