"""Text sections for exact (uprobe) tracing: exact hold/wait beside the sampled figures, wait and
hold distributions as log2 histograms, exact blame, and garbage collections."""

from __future__ import annotations

from gilty.report.labels import cut_names
from gilty.sampling.analysis import Summary
from gilty.sampling.analysis.exact import log2_histogram_lines, zero_count
from gilty.sampling.analysis.wording import milliseconds, percent

NAME_WIDTH = 20


def _ms(seconds: float) -> str:
    return milliseconds(seconds) if seconds else "-"


def exact_sections(summary: Summary) -> list:
    """Lines for the exact part of a record summary; empty without --exact."""
    exact = summary.exact
    if exact is None:
        return []
    out = [
        f"Exact GIL accounting (uprobes: {', '.join(exact.symbols) or 'take_gil, drop_gil'}; "
        f"{exact.events} events over {exact.wall_s:.1f} s = {exact.events_per_s:.0f}/s, {exact.lost} lost)",
        "HOLD: take_gil return to drop_gil; WAIT: inside take_gil; HANDOFF: inside drop_gil (dropping on request);",
        "sampled shares in brackets (holding_gil + gc + cpu_wait holding the GIL compares with HOLD, waiting_gil with "
        "WAIT + HANDOFF).",
        f"{'THREAD':<{NAME_WIDTH}} {'TID':>8} {'HOLD':>7} {'(sampled)':>9} {'WAIT':>7} {'HANDOFF':>7} {'(sampled)':>9} "
        f"{'ACQUIRED':>8} {'FORCED':>6}  WAIT p50 / p90 / p99 / max",
    ]
    traced = [t for t in summary.threads if t.tid in exact.threads]
    # Per thread (exact figures are not pooled): names cut keeping their ends, so a pool's rows differ.
    names = dict(zip((t.tid for t in traced), cut_names([t.name for t in traced], NAME_WIDTH)))
    for t in traced:
        e = exact.threads[t.tid]
        # A holder preempted by the kernel still holds the GIL, as exact tracing sees it.
        sampled_hold = t.states.hold_fraction
        sampled_wait = t.states.fraction(2)
        w = e.wait
        dist = " / ".join(_ms(w[k]) for k in ("p50_s", "p90_s", "p99_s", "max_s")) if w["count"] else "-"
        out.append(
            f"{names[t.tid]:<{NAME_WIDTH}} {t.tid:>8} {percent(e.hold_fraction):>7} "
            f"{'(' + percent(sampled_hold) + ')':>9} {percent(e.wait_fraction):>7} {percent(e.handoff_fraction):>7} "
            f"{'(' + percent(sampled_wait) + ')':>9} "
            f"{e.acquisitions:>8} {e.forced_switches:>6}  {dist}"
        )
    waiting = [exact.threads[t.tid] for t in summary.threads if t.tid in exact.threads and exact.threads[t.tid].wait_s > 0]
    waiting.sort(key=lambda e: -e.wait_s)
    if waiting:
        out.append("")
        out.append("GIL wait per acquisition (log2 histogram, exact)")
        for e in waiting[:4]:
            unheld = zero_count(e.wait["log2_hist_ns"])
            # A wait with nobody else holding the GIL lasted 0 ns as a wait for the GIL: say how many.
            free = f" ({unheld} with no other holder: waiting for a CPU or the hand-over, not shown)" if unheld else ""
            out.append(f"  {e.name} (tid {e.tid}): {e.wait['count']} waits, {e.wait_s:.3f} s in all{free}")
            out += ["    " + line for line in log2_histogram_lines(e.wait["log2_hist_ns"])]
        out.append("")
        out.append("Who held the GIL during each wait (exact)")
        for e in waiting:
            out.append(f"  {e.name} (tid {e.tid}) waited {e.wait_s:.3f} s:")
            for b in e.blame[:3]:
                where = f" in {b.holder_function} ({b.holder_file}:{b.holder_line})" if b.holder_function else ""
                share = b.wait_s / e.wait_s if e.wait_s else 0.0
                out.append(f"    {percent(share):>5}  {b.holder_name} (tid {b.holder_tid}){where}")
    if exact.collections:
        out.append("")
        out.append(
            f"Garbage collections (exact): {len(exact.collections)}, {exact.gc_s * 1000:.1f} ms in all = "
            f"{percent(exact.gc_fraction)} of wall time"
        )
        for gen, d in sorted(exact.gc_by_generation.items()):
            out.append(
                f"  generation {gen}: {d['count']} collections, p50 {_ms(d['p50_s'])}, p99 {_ms(d['p99_s'])}, "
                f"max {_ms(d['max_s'])}"
            )
    return out
