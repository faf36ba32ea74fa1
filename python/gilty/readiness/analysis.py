"""Per process and per thread pool: the bound (``bound.estimate``) on what a free-threaded build
gives back, the modules that would turn the GIL back on, and the verdict with its reasons."""

from __future__ import annotations

import math
import os
from typing import Optional

from gilty._errors import UsageError
from gilty.readiness.bound import ThreadShares, estimate
from gilty.readiness.model import GroupReadiness, ModuleScan, ProcessReadiness
from gilty.readiness.modules import scan_from_raw
from gilty.sampling.analysis.pools import group_pools
from gilty.sampling.analysis.states import thread_states
from gilty.sampling.session import CPU_WAIT, GC, HOLDING_GIL, IDLE, NATIVE, UNKNOWN, WAITING_GIL, Session

# The free-threaded build's single-thread slowdown assumed by default: "roughly 5-10 %" on
# pyperformance for 3.14t (What's New in Python 3.14, free-threaded mode); the upper end.
DEFAULT_SLOWDOWN = 0.10
# A process whose throughput could grow by less than this is not worth moving.
WORTH_TRYING = 0.10
# Modules named in a verdict line before "and N more".
NAMED_MODULES = 5


def parse_slowdown(text: str) -> float:
    """0.1 from "10%" or "10"; a share outside 0-300 % is a usage error."""
    raw = text.strip().rstrip("%").strip()
    try:
        value = float(raw) / 100.0
    except ValueError:
        raise UsageError(f"--ft-slowdown {text!r} is not a percentage (e.g. 10%)") from None
    if not (0.0 <= value <= 3.0):
        raise UsageError(f"--ft-slowdown {text!r} is outside 0% to 300%")
    return value


def thread_shares(session: Session) -> list:
    """Each sampled thread's ThreadShares."""
    out = []
    for tid, st in thread_states(session).items():
        if not st.samples:
            continue
        # Raw counts: a holder preempted by the kernel was waiting for a CPU, not running Python.
        c = st.counts
        n = st.samples
        out.append(
            ThreadShares(
                tid=tid,
                name=session.thread_name(tid),
                seconds=n / session.rate_hz,
                holding=(c[HOLDING_GIL] + c[GC]) / n,
                waiting=c[WAITING_GIL] / n,
                native=c[NATIVE] / n,
                cpu_wait=c[CPU_WAIT] / n,
                idle=(c[IDLE] + c[UNKNOWN]) / n,
            )
        )
    return out


def cpus_of(session: Session) -> float:
    """The CPUs the process may use (its affinity, read while recording), else the host's."""
    cpus = session.sched.get("cpus")
    if isinstance(cpus, dict) and cpus.get("allowed"):
        return float(cpus["allowed"])
    return float(os.cpu_count() or 1)


def slowdown_of(session: Session) -> float:
    ft = session.free_threading or {}
    value = ft.get("slowdown")
    return float(value) if isinstance(value, (int, float)) and value >= 0 else DEFAULT_SLOWDOWN


def readiness(session: Session, slowdown: Optional[float] = None) -> ProcessReadiness:
    """The readiness of one recorded process."""
    slowdown = slowdown_of(session) if slowdown is None else slowdown
    shares = thread_shares(session)
    cpus = cpus_of(session)
    whole = GroupReadiness("process", [t.tid for t in shares], estimate(shares, cpus, slowdown))
    pools = [
        GroupReadiness(p.name, p.tids, estimate(p.members, cpus, slowdown))
        for p in group_pools(shares, lambda t: t.name, lambda t: t.tid, lambda t: [1])
        if p.size > 1
    ]
    ft = session.free_threading or {}
    modules = scan_from_raw(ft.get("modules"), session.target.python_version, ft.get("modules_error"))
    out = ProcessReadiness(session.target.pid, session.target.python_version, slowdown, whole, pools, modules)
    _judge(out, cpus)
    return out


def pct(x: float) -> str:
    """ "+29 %", "-9 %", "0 %" (never "-0 %")."""
    n = round(x * 100)
    return f"{n:+d} %" if n else "0 %"


def _modules_phrase(scan: ModuleScan) -> Optional[str]:
    """The verdict's part about modules, or None when they say nothing either way."""
    if scan.modules is None:
        return f"modules not read ({scan.note})" if scan.note else None
    if not scan.known:
        return "which modules would block it is unknown before 3.13 (no Py_mod_gil slot)"
    blockers = scan.blockers
    if not blockers:
        unknown = [m for m in scan.modules if m.gil == "unknown"]
        if unknown:
            return f"{len(unknown)} module(s) cannot be told ({unknown[0].unknown_why})"
        return None
    names = [f"{m.name} ({m.package or m.path or '?'})" for m in blockers[:NAMED_MODULES]]
    more = f" and {len(blockers) - NAMED_MODULES} more" if len(blockers) > NAMED_MODULES else ""
    return f"these modules block it: {', '.join(names)}{more}"


def _judge(r: ProcessReadiness, cpus: float) -> None:
    b = r.process.bound
    r.worth = b.throughput_high >= WORTH_TRYING
    modules = _modules_phrase(r.modules)
    if r.worth:
        r.verdict = f"worth trying: up to {b.throughput_high * 100:.0f} % more throughput"
        if modules:
            r.verdict += f"; {modules}"
    else:
        under = max(1, math.ceil(max(b.throughput_high, b.gil_cost) * 100))
        r.verdict = f"not worth it: the GIL costs under {under} %"
    r.reasons = [
        f"threads waited for the GIL {b.gil_cost * 100:.0f} % of their busy time "
        f"({b.gil_wait_s:.1f} thread-s of {b.busy_s:.1f}): what a free-threaded build gives back",
        f"serial anyway: {b.serial_name or 'no thread'}'s own Python time, {b.serial_s:.1f} s of {b.seconds:.1f} s",
        f"throughput {pct(b.throughput_low)} to {pct(b.throughput_high)}, bounded by "
        + (f"{cpus:g} CPUs ({b.cpu_s:.1f} CPU-s needed)" if b.limited_by == "cpus" else "its threads' own time"),
        f"a unit of a thread's work takes {pct(-b.latency_low)} with its idle time, {pct(-b.latency_high)} of its busy time",
    ]
    if modules and not r.worth:
        r.reasons.append(modules)
    if r.modules.note and r.modules.modules is not None:
        r.reasons.append(f"modules {r.modules.note}")
    r.assumptions = [
        "no new contention on other locks",
        f"free-threaded Python {r.slowdown * 100:g} % slower on one thread (--ft-slowdown)",
        f"{cpus:g} CPUs available to the process",
        "idle time (I/O, sleeps, waits for work) unchanged",
    ]
