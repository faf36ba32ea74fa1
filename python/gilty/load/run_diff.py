"""Two load runs, or two recordings, side by side: each figure of A and B, the change, and whether the
change is beyond run-to-run noise.

Noise is estimated from each run's own one-second blocks (the batch-means method): a figure measured
over a run is also measured in each of its seconds, and the standard error of the whole-run figure is
taken as the standard deviation of the per-second values over the square root of their number. Seconds
are long compared with a request or a GIL hand-off, so the blocks are close to independent where
single samples are not. A change is *beyond noise* when it exceeds twice the combined standard error of
A and B (about 95 % for independent runs) and also a floor (5 % of the larger value, or the figure's
own absolute floor), because a very steady run would otherwise make any tiny change look real: what
differs between runs but is constant within one (another job on the machine, a warm cache) is not in
the blocks. Figures without per-second values (per-endpoint server time) use counting noise: a share
of n samples has a standard error of sqrt(n) samples, which is optimistic for runs of samples; their
floor is therefore 10 %.
"""

from __future__ import annotations

import bisect
import math
import os
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from gilty.sampling.aggregate import PASS_GIL_HELD
from gilty.sampling.processes import roles
from gilty.sampling.session import CPU_WAIT, GC, HOLDING_GIL, IDLE, NATIVE, STATE_NAMES, WAITING_GIL, Recording

FORMAT_VERSION = 1
Z = 2.0
REL_FLOOR = 0.05
COUNT_REL_FLOOR = 0.10
BLOCK_S = 1.0


@dataclass
class Row:
    scope: str  # "step 50 rps", "step 50 rps /block", "thread MainThread", "recording"
    metric: str  # "p99_s", "throughput", "gil_utilisation", "holding_gil", ...
    a: Optional[float]
    b: Optional[float]
    change: Optional[float]  # b - a
    noise: Optional[float]  # Z x combined standard error; None when not estimable
    beyond_noise: bool


def _se(values: list) -> Optional[float]:
    values = [v for v in values if v is not None]
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(var / n)


# Student's t at 97.5 % by degrees of freedom: with a few seconds per run the standard error is itself
# uncertain, and 2 would flag a noisy 3-second step as a change.
T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 15: 2.13, 20: 2.09, 30: 2.04}


def t975(blocks: Optional[int]) -> float:
    if blocks is None:
        return Z
    df = max(1, blocks - 1)
    return next((T975[k] for k in sorted(T975) if k >= df), Z)


def row(
    scope: str, metric: str, a, b, se_a, se_b, abs_floor: float = 0.0, rel_floor: float = REL_FLOOR, blocks: Optional[int] = None
) -> Row:
    if a is None or b is None:
        return Row(scope, metric, a, b, None, None, False)
    noise = t975(blocks) * math.sqrt(se_a**2 + se_b**2) if se_a is not None and se_b is not None else None
    change = b - a
    floor = max(abs_floor, rel_floor * max(abs(a), abs(b)))
    beyond = noise is not None and abs(change) > max(noise, floor)
    return Row(scope, metric, a, b, change, noise, beyond)


# -- load runs ---------------------------------------------------------------------------------

PERCENTILES = ("p50", "p90", "p99")


def _full_seconds(step: dict) -> list:
    """The step's seconds wholly inside its window (the last one is often cut short)."""
    whole = int(step["window_s"] + 1e-9)
    return [s for s in step["seconds"] if s["t"] < whole]


def _step_rows(a: dict, b: dict) -> list:
    scope = f"step {a['requested_rate']:g} rps"
    sa, sb = _full_seconds(a), _full_seconds(b)
    n = min(len(sa), len(sb))
    rows = []
    tp = lambda step: step["ok"] / (step["window_s"] or 1.0)  # noqa: E731
    ok_per_s = lambda secs: [s["completed"] - s["errors"] for s in secs]  # noqa: E731
    rows.append(row(scope, "throughput", tp(a), tp(b), _se(ok_per_s(sa)), _se(ok_per_s(sb)), abs_floor=1.0, blocks=n))
    for p in PERCENTILES:
        rows.append(
            row(
                scope,
                f"{p}_s",
                a["latency_s"][p],
                b["latency_s"][p],
                _se([s["latency_s"][p] for s in sa]),
                _se([s["latency_s"][p] for s in sb]),
                abs_floor=0.0005,
                blocks=n,
            )
        )
    err = lambda step: step["verdict"]["error_share"]  # noqa: E731
    err_s = lambda secs: [(s["errors"] + s["dropped"]) / max(1, s["sent"] + s["dropped"]) for s in secs]  # noqa: E731
    rows.append(row(scope, "error_share", err(a), err(b), _se(err_s(sa)), _se(err_s(sb)), abs_floor=0.005, blocks=n))
    # Per URL, matched by path (the two runs may have used different ports). No per-second split per
    # URL is kept, so their noise is the step's, scaled by the URL's share of the answers.
    urls_a = {urlsplit(r["url"]).path or "/": r for r in a["per_request"]}
    urls_b = {urlsplit(r["url"]).path or "/": r for r in b["per_request"]}
    if len(urls_a) > 1 or len(urls_b) > 1:
        for path in [p for p in urls_a if p in urls_b]:
            ra, rb = urls_a[path], urls_b[path]
            for p in ("p50", "p99"):
                se_a = _se([s["latency_s"][p] for s in sa])
                se_b = _se([s["latency_s"][p] for s in sb])
                scale = lambda r, step: math.sqrt(max(1, step["ok"]) / max(1, r["ok"]))  # noqa: E731
                rows.append(
                    row(
                        f"{scope} {path}",
                        f"{p}_s",
                        ra["latency_s"][p],
                        rb["latency_s"][p],
                        None if se_a is None else se_a * scale(ra, a),
                        None if se_b is None else se_b * scale(rb, b),
                        abs_floor=0.0005,
                        blocks=n,
                    )
                )
    rows.extend(_endpoint_rows(scope, a, b))
    return rows


# Mean server threads busy in one endpoint below which a change is not worth a flag.
ENDPOINT_ABS_FLOOR = 0.05


def _count_se(endpoint: dict, profile: dict, window_s: float) -> float:
    period = 1.0 / profile.get("rate_hz", 200.0)
    return math.sqrt(endpoint["total_s"] / period) * period / window_s


def _endpoint_rows(scope: str, a: dict, b: dict) -> list:
    """Server thread-seconds per second of the step (mean threads busy in it), per endpoint; counting
    noise (module docstring)."""
    pa, pb = a.get("profile"), b.get("profile")
    if not pa or not pb:
        return []
    rows = []
    ea = {(e["function"], os.path.basename(e["file"])): e for e in pa.get("endpoints", [])}
    eb = {(e["function"], os.path.basename(e["file"])): e for e in pb.get("endpoints", [])}
    for key in [k for k in ea if k in eb]:
        label = key[0] if not key[1] else f"{key[0]} ({key[1]})"
        wa, wb = a["window_s"] or 1.0, b["window_s"] or 1.0
        va, vb = ea[key]["total_s"] / wa, eb[key]["total_s"] / wb
        rows.append(
            row(
                f"{scope} endpoint {label}",
                "server_threads",
                va,
                vb,
                _count_se(ea[key], pa, wa),
                _count_se(eb[key], pb, wb),
                abs_floor=ENDPOINT_ABS_FLOOR,
                rel_floor=COUNT_REL_FLOOR,
            )
        )
        holding_a, holding_b = ea[key]["share_holding"], eb[key]["share_holding"]
        if max(holding_a, holding_b) >= 0.05 and max(va, vb) >= ENDPOINT_ABS_FLOOR:
            rows.append(row(f"{scope} endpoint {label}", "share_holding", holding_a, holding_b, None, None))
    pss_a, pss_b = sum(m["pss"] for m in pa.get("memory", [])), sum(m["pss"] for m in pb.get("memory", []))
    if pss_a and pss_b:
        # One reading per step and run: no noise estimate, never flagged; shown for the side-by-side.
        rows.append(row(f"{scope} server", "pss_mib", pss_a / 2**20, pss_b / 2**20, None, None))
    for la, lb in zip(pa.get("loops", []), pb.get("loops", [])):
        rows.append(row(f"{scope} loop {la['thread']}", "lag_share", la["lag_share"], lb["lag_share"], None, None))
    return rows


def compare_load(a: dict, b: dict) -> list:
    steps_b = {round(s["requested_rate"], 6): s for s in b["steps"]}
    rows = []
    for sa in a["steps"]:
        sb = steps_b.get(round(sa["requested_rate"], 6))
        if sb is not None:
            rows.extend(_step_rows(sa, sb))
    ka, kb = a.get("knee"), b.get("knee")
    if ka and kb:
        rows.append(row("knee", "rate", ka["rate"], kb["rate"], None, None))
        rows.append(row("knee", "max_throughput", ka["max_throughput"], kb["max_throughput"], None, None))
    return rows


# -- recordings --------------------------------------------------------------------------------

_SHARE_STATES = (
    (HOLDING_GIL, "holding_gil"),
    (WAITING_GIL, "waiting_gil"),
    (NATIVE, "native"),
    (IDLE, "idle"),
    (GC, "gc"),
    (CPU_WAIT, "cpu_wait"),
)


def _blocks(times) -> list:
    """Pass indices where each one-second block starts."""
    if not len(times):
        return [0]
    t0 = times[0]
    starts, edge = [0], t0 + BLOCK_S
    for i, t in enumerate(times):
        while t >= edge:
            starts.append(i)
            edge += BLOCK_S
    return starts


def recording_figures(recording: Recording) -> dict:
    """{(scope, metric): (whole-run value, [per-second values])} of a recording."""
    # scope ("recording", and "role worker" etc. when the tree has roles) -> [held, passes, {block: [held, passes]}]
    held: dict = {}
    per_name: dict = {}  # scope -> {"total": [passes by state], "blocks": {block: [passes by state]}}
    role_of = roles(recording)
    with_roles = any(r != "main" for r in role_of.values())
    for s in recording.sessions:
        if not s.samples:
            continue
        role = role_of.get(s.target.pid, "main")
        starts = _blocks(s.times)
        flags = s.pass_flags
        for scope in ("recording", f"role {role}") if with_roles else ("recording",):
            acc = held.setdefault(scope, [0, 0, {}])
            for k, start in enumerate(starts):
                # Pass indices count kept passes (every timeline_step-th of a long recording's).
                end = starts[k + 1] if k + 1 < len(starts) else len(s.times)
                if end - start < 0.5 * s.rate_hz * BLOCK_S / s.timeline_step:  # a cut-off last second
                    continue
                block = acc[2].setdefault(k, [0, 0])
                block[0] += sum(1 for f in flags[start:end] if f & PASS_GIL_HELD)
                block[1] += end - start
            acc[0] += s.passes_with_gil_held()
            acc[1] += s.samples
        # A master's MainThread and its workers' are different threads: one row per role and name.
        for tid, runs in s.thread_runs.items():
            scope = f"thread {s.thread_name(tid)}" if role == "main" else f"{role} thread {s.thread_name(tid)}"
            entry = per_name.setdefault(scope, {"total": [0] * len(STATE_NAMES), "blocks": {}})
            for first, passes, state, _stack, _nr in runs.runs():
                code = state if 0 <= state < len(STATE_NAMES) else len(STATE_NAMES) - 1
                entry["total"][code] += passes
                # split the run at block edges
                i, last = first, first + passes
                while i < last:
                    k = bisect.bisect_right(starts, i) - 1
                    edge = starts[k + 1] if k + 1 < len(starts) else last
                    n = min(last, edge) - i
                    entry["blocks"].setdefault(k, [0] * len(STATE_NAMES))[code] += n
                    i += n
    out = {}
    for scope, (h, n, blocks) in held.items():
        if n:
            out[(scope, "gil_utilisation")] = (h / n, [bh / bn for bh, bn in blocks.values() if bn])
    for scope, entry in per_name.items():
        total = sum(entry["total"])
        if not total:
            continue
        for code, metric in _SHARE_STATES:
            blocks = [c[code] / sum(c) for c in entry["blocks"].values() if sum(c) >= 0.5 * recording.rate_hz * BLOCK_S]
            out[(scope, metric)] = (entry["total"][code] / total, blocks)
    return out


def compare_recordings(a: Recording, b: Recording) -> list:
    fa, fb = recording_figures(a), recording_figures(b)
    rows = []
    for key in [k for k in fa if k in fb]:
        (va, ba), (vb, bb) = fa[key], fb[key]
        if max(va, vb) < 0.01:
            continue  # a state neither run was in
        rows.append(row(key[0], key[1], va, vb, _se(ba), _se(bb), abs_floor=0.01, blocks=min(len(ba), len(bb))))
    # Where the not-idle time went, function by function (self time; counting noise).
    from gilty.sampling.analysis.difference import function_changes

    for name, metric, pa, pb, noise, beyond in function_changes(a, b):
        rows.append(Row(f"function {name}", metric, pa, pb, pb - pa, noise, beyond))
    return rows


# -- output ------------------------------------------------------------------------------------

NOISE_METHOD = (
    "per-second blocks (batch means): Student's t (97.5 %, seconds - 1 degrees of freedom) x the combined "
    "standard error of A and B, with a floor of 5 % of the larger value; per-endpoint server time: "
    "counting noise x 2, 10 % floor"
)


# Metrics where a rise is worse for the service, and where it is better; others have no direction.
WORSE_UP = ("p50_s", "p90_s", "p99_s", "error_share", "lag_share")
BETTER_UP = ("throughput", "rate", "max_throughput")


def direction(r: Row, judged: bool = True) -> str:
    """ "better", "worse" or "" for a row's change; with ``judged``, only for a change beyond noise."""
    if (judged and not r.beyond_noise) or r.change is None:
        return ""
    if r.metric in WORSE_UP:
        return "worse" if r.change > 0 else "better"
    if r.metric in BETTER_UP:
        return "better" if r.change > 0 else "worse"
    return ""


def noise_unknown(r: Row) -> bool:
    """A change as large as the floor whose noise cannot be estimated (one reading per run: the knee, a
    loop's lag, memory): neither beyond noise nor within it."""
    if r.noise is not None or r.a is None or r.b is None or r.a == r.b:
        return False
    return abs(r.b - r.a) >= REL_FLOOR * max(abs(r.a), abs(r.b))


# A loop's lag moving by this share of the time leads the comparison: every request on that loop waits for it.
LAG_HEADLINE = 0.10
# A change of at least this share of the larger value called noise is explained.
LARGE_CHANGE = 0.5


def is_large_within_noise(r: Row) -> bool:
    return (
        not r.beyond_noise
        and r.noise is not None
        and r.change is not None
        and abs(r.change) >= LARGE_CHANGE * max(abs(r.a), abs(r.b)) > 0
    )
