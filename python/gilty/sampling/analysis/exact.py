"""Exact GIL and GC figures from the uprobe tracer, shaped for the reports.

The native tracer hands over raw totals and distributions per thread (``Sampler.exact_summary()``);
here they become fractions of the traced wall time, blame entries with thread names and the holder's
sampled function, and per-generation GC figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gilty.sampling.session import Session


@dataclass
class ExactBlame:
    holder_tid: int
    holder_name: str
    holder_function: Optional[str]  # innermost function of the holder in samples taken during the waits
    holder_file: Optional[str]
    holder_line: Optional[int]
    wait_s: float


@dataclass
class ExactThread:
    tid: int
    name: str
    hold_s: float
    wait_s: float
    hold_fraction: float
    wait_fraction: float
    acquisitions: int
    forced_switches: int
    handoff_s: float  # inside drop_gil: a holder asked to drop waits there for the requester
    handoff_fraction: float
    wait: dict  # {"p50_s", "p90_s", "p99_s", "max_s", "count", "log2_hist_ns": {lower_ns: count}}
    hold: dict
    blame: list = field(default_factory=list)  # [ExactBlame], most waiting first
    # In take_gil while no other thread held the GIL: waiting for a CPU (or the hand-over), not for
    # the GIL; left out of wait_s.
    wait_unheld_s: float = 0.0


@dataclass
class ExactSummary:
    wall_s: float
    events: int
    lost: int
    threads_attached: int
    symbols: list
    threads: dict  # tid -> ExactThread
    collections: list  # [{"tid", "generation", "start_s", "duration_s", "collected", "open"}]
    gc_by_generation: dict  # generation (str) -> distribution dict
    gc_s: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def gc_fraction(self) -> float:
        return self.gc_s / self.wall_s if self.wall_s > 0 else 0.0


def _distribution(raw: dict) -> dict:
    out = {key: raw[key] for key in ("count", "total_s", "p50_s", "p90_s", "p99_s", "max_s")}
    out["log2_hist_ns"] = {int(k): int(v) for k, v in raw["log2_hist_ns"].items()}
    return out


def summarise_exact(session: Session) -> Optional[ExactSummary]:
    """None when the recording had no exact tracing."""
    raw = session.exact
    if raw is None:
        return None
    wall = raw["wall_s"]
    threads = {}
    for tid, t in raw["threads"].items():
        tid = int(tid)
        blame = []
        for b in t["blame"]:
            top = next((f for f, _n in b["functions"] if f >= 0), None)
            frame = session.frames.get(top) if top is not None else None
            blame.append(
                ExactBlame(
                    holder_tid=b["holder_tid"],
                    holder_name=session.thread_name(b["holder_tid"]),
                    holder_function=frame[0] if frame else None,
                    holder_file=frame[1] if frame else None,
                    holder_line=frame[2] if frame else None,
                    wait_s=b["wait_s"],
                )
            )
        hold_s, wait_s = t["hold"]["total_s"], t["wait"]["total_s"]
        threads[tid] = ExactThread(
            tid=tid,
            name=session.thread_name(tid),
            hold_s=hold_s,
            wait_s=wait_s,
            hold_fraction=hold_s / wall if wall > 0 else 0.0,
            wait_fraction=wait_s / wall if wall > 0 else 0.0,
            acquisitions=t["acquisitions"],
            forced_switches=t["forced_switches"],
            handoff_s=t.get("handoff_s", 0.0),
            handoff_fraction=t.get("handoff_s", 0.0) / wall if wall > 0 else 0.0,
            wait=_distribution(t["wait"]),
            hold=_distribution(t["hold"]),
            blame=blame,
            wait_unheld_s=t.get("wait_unheld_s", 0.0),
        )
    return ExactSummary(
        wall_s=wall,
        events=raw["events"],
        lost=raw["lost"],
        threads_attached=raw["threads_attached"],
        symbols=list(raw.get("symbols", [])),
        threads=threads,
        collections=list(raw["collections"]),
        gc_by_generation={str(g): _distribution(d) for g, d in raw["gc_by_generation"].items()},
        gc_s=sum(c["duration_s"] for c in raw["collections"]),
    )


def log2_histogram_lines(hist: dict, width: int = 40) -> list:
    """Rows in the shape of a SystemTap/bpftrace @hist_log: [lo, hi)  count |@@@@   |, the bars in
    one column. Bucket 0 (durations of 0 ns: a wait during which no other thread held the GIL) is
    no range of time and is left to the caller to state (``zero_count``)."""
    rows = [(f"[{_ns(lo)}, {_ns(lo * 2)})", hist[lo]) for lo in sorted(hist) if lo > 0]
    if not rows:
        return []
    peak = max(n for _label, n in rows)
    # Wide enough for any range under a minute ("[268ms, 536ms)"): histograms of several threads align.
    label_width = max(14, *(len(label) for label, _n in rows))
    lines = []
    for label, n in rows:
        bar = "@" * max(1, round(width * n / peak)) if n else ""
        lines.append(f"{label:<{label_width}} {n:>9} |{bar:<{width}}|")
    return lines


def zero_count(hist: dict) -> int:
    """Durations of 0 ns in a log2 histogram (bucket 0)."""
    return hist.get(0, 0)


def _ns(ns: int) -> str:
    for unit, size in (("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)):
        if ns >= size:
            return f"{ns // size}{unit}"
    return f"{ns}ns"
