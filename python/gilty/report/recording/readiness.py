"""Free-threading readiness in a recording's reports (gilty.readiness, docs/free-threading.md): the
text section and the JSON object. The JSON report always carries the bound (it needs only the state
shares); the text report shows the section when the recording was made with --free-threading."""

from __future__ import annotations

from typing import Optional

from gilty.readiness.analysis import pct, readiness
from gilty.readiness.model import GroupReadiness, ProcessReadiness
from gilty.sampling.session import Session

MODULES_SHOWN = 12  # rows of the text section's module table; the JSON report lists them all


def _r(x: float) -> float:
    return round(x, 4)


def _group(g: GroupReadiness) -> dict:
    b = g.bound
    return {
        "label": g.label,
        "tids": list(g.tids),
        "seconds": _r(b.seconds),
        "thread_s": _r(b.thread_s),
        "busy_s": _r(b.busy_s),
        "gil_wait_s": _r(b.gil_wait_s),
        "gil_cost": _r(b.gil_cost),
        "serial_s": _r(b.serial_s),
        "serial_tid": b.serial_tid,
        "serial_thread": b.serial_name,
        "cpu_s": _r(b.cpu_s),
        "cpus": b.cpus,
        "throughput_gain": [_r(b.throughput_low), _r(b.throughput_high)],
        "latency_cut": [_r(b.latency_low), _r(b.latency_high)],
        "limited_by": b.limited_by,
        "working_threads": b.working_threads,
    }


def report(session: Session) -> Optional[dict]:
    if not session.samples:
        return None
    r = readiness(session)
    scan = r.modules
    return {
        "asked": session.free_threading is not None,
        "verdict": r.verdict,
        "worth_trying": r.worth,
        "reasons": list(r.reasons),
        "assumptions": list(r.assumptions),
        "slowdown": r.slowdown,
        "process": _group(r.process),
        "pools": [_group(p) for p in r.pools],
        "modules": None if scan.modules is None else [m.to_dict() for m in scan.modules],
        "modules_known": scan.known,
        "modules_note": scan.note,
        "blocking_modules": [m.name for m in scan.blockers],
    }


def verdict_line(session: Session) -> Optional[str]:
    """The verdict for the HTML page's summary, when recorded with --free-threading."""
    if session.free_threading is None or not session.samples:
        return None
    return readiness(session).verdict


def _module_rows(r: ProcessReadiness) -> list:
    scan = r.modules
    if scan.modules is None:
        return [f"  modules: not read ({scan.note})"] if scan.note else []
    exts = [m for m in scan.modules if not m.builtin]
    builtin = len(scan.modules) - len(exts)
    # Blockers first, then the application's own and third-party modules: the standard library's
    # come with the interpreter build, free-threaded or not.
    rows = [m for m in sorted(exts, key=lambda m: (not m.blocks, m.package == "stdlib", m.name))][:MODULES_SHOWN]
    out = [f"  extension modules: {len(exts)} loaded from files, {builtin} built in" + (f" ({scan.note})" if scan.note else "")]
    if not scan.known:
        out.append("  (whether each declares Py_mod_gil is unknown before 3.13)")
    for m in rows:
        if not scan.known:
            out.append(f"    {m.name:<28} {m.init:<12} {m.dist or m.package or (m.path or '')}")
            continue
        gil = {"not_used": "free-threading ok", "used": "needs the GIL", "undeclared": "needs the GIL (no Py_mod_gil)"}.get(
            m.gil, f"unknown: {m.unknown_why}" if m.unknown_why else "unknown"
        )
        where = m.dist or m.package or (m.path or "")
        out.append(f"    {m.name:<28} {m.init:<12} {gil:<30} {where}")
    blockers_builtin = [m.name for m in scan.blockers if m.builtin]
    if blockers_builtin:
        out.append(f"    built in and needing the GIL: {', '.join(blockers_builtin)}")
    if len(exts) > len(rows):
        out.append(f"    ... and {len(exts) - len(rows)} more (in the JSON report)")
    return out


def section(session: Session) -> list:
    """The text report's "Free threading" section; empty unless recorded with --free-threading."""
    if session.free_threading is None or not session.samples:
        return []
    r = readiness(session)
    b = r.process.bound
    out = ["Free threading (would a free-threaded build run it faster?)"]
    out.append(
        f"  process: GIL waits {b.gil_wait_s:.1f} thread-s ({b.gil_cost * 100:.0f} %), serial anyway {b.serial_s:.1f} s "
        f"({b.serial_name}), throughput {pct(b.throughput_low)} to {pct(b.throughput_high)}"
    )
    for p in r.pools:
        pb = p.bound
        out.append(
            f"  pool {p.label}: GIL waits {pb.gil_wait_s:.1f} thread-s ({pb.gil_cost * 100:.0f} %), "
            f"throughput {pct(pb.throughput_low)} to {pct(pb.throughput_high)}"
        )
    out += [f"  - {reason}" for reason in r.reasons]
    out.append(f"  assumes: {'; '.join(r.assumptions)}")
    out += _module_rows(r)
    out.append(f"  {r.verdict}")
    return out
