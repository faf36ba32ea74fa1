"""Text renderings of a Recording of several processes: the report (a process table, then each
process's threads with pools on one line) and the `gilty top` frame that fits a terminal.
"""

from __future__ import annotations

import datetime
from typing import Optional

from gilty.sampling.analysis import summarise
from gilty.sampling.analysis.functions import top_function_overall
from gilty.sampling.analysis.pools import Pool, group_pools
from gilty.sampling.analysis.states import gil_utilisation, mean_waiting_threads, thread_states
from gilty.sampling.analysis.wording import percent
from gilty.sampling.processes import roles
from gilty.sampling.session import GC, HOLDING_GIL, IDLE, NATIVE, STATE_NAMES, WAITING_GIL, Recording, Session

PARTIAL_MARKER = "PARTIAL"
POOL_NOTE = "×N: N threads named alike (a pool) on one line: SAMPLES summed, shares averaged over its threads"
SORT_KEYS = ("hold", "wait", "cpu")


def _cut(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "~"


def _pct(f: float) -> str:
    return percent(f) if f else "-"


def process_shares(session: Session) -> list:
    """Per state code, the share of all of the process's thread samples."""
    counts = [0] * len(STATE_NAMES)
    for (_tid, st, _stack), n in session.stack_counts().items():
        counts[st if 0 <= st < len(counts) else len(counts) - 1] += n
    total = sum(counts)
    return [c / total if total else 0.0 for c in counts]


def sort_value(fractions: list, key: str) -> float:
    """What ``--sort`` orders by: GIL held (collecting included), GIL waited for, or on a CPU."""
    if key == "wait":
        return fractions[WAITING_GIL]
    hold = fractions[HOLDING_GIL] + fractions[GC]
    return hold + fractions[NATIVE] if key == "cpu" else hold


def thread_pools(session: Session) -> list:
    """The session's threads grouped into pools, each Pool's members being ThreadStates."""
    states = thread_states(session)
    return group_pools(
        [states[tid] for tid in session.tids() if tid in states],
        name_of=lambda st: session.thread_name(st.tid),
        tid_of=lambda st: st.tid,
        counts_of=lambda st: st.counts,
    )


def _top_label(session: Session, pool: Pool, top: dict, short: bool = False) -> str:
    shares = [top[tid] for tid in pool.tids if tid in top]
    if not shares:
        return ""
    best = max(shares, key=lambda f: f.samples)
    if short and best.function is not None:
        # A terminal line has room for the function and where it is, not for the whole path.
        return f"{best.function} ({best.file.rsplit('/', 1)[-1]}:{best.line})"
    return f"{best.label()} [{best.state}]"


# -- the report -------------------------------------------------------------------------------

PROCESS_HEADING = f"{'PID':>7} {'ROLE':<6} {'SAMPLES':>7} {'GIL':>5} {'HOLD':>5} {'WAIT':>5} {'NATIVE':>6} {'IDLE':>5}  COMMAND"


def _process_row(session: Session, role: str, width: int = 100) -> str:
    f = process_shares(session)
    line = (
        f"{session.target.pid:>7} {_cut(role, 6):<6} {session.samples:>7} {percent(gil_utilisation(session)):>5} "
        f"{_pct(f[HOLDING_GIL] + f[GC]):>5} {_pct(f[WAITING_GIL]):>5} {_pct(f[NATIVE]):>6} {_pct(f[IDLE]):>5}  "
    )
    command = session.target.cmdline or session.target.executable
    if session.exited_at is not None:
        command = f"[exited at {session.exited_at:.1f} s] " + command
    return line + _cut(command, max(width - len(line), 10))


THREAD_HEADING = f"{'THREAD':<26} {'TID':>8} {'SAMPLES':>7} " + " ".join(f"{h:>6}" for h in ("HOLD", "GC", "WAIT", "NATIVE", "IDLE"))


def _thread_lines(session: Session) -> list:
    top = top_function_overall(session, thread_states(session))
    pools = sorted(thread_pools(session), key=lambda p: (-sort_value(p.fractions, "hold"), p.tids[0]))
    lines = [THREAD_HEADING + "  TOP FUNCTION"]
    for p in pools:
        tid = str(p.tids[0]) if p.size == 1 else f"×{p.size}"
        f = p.fractions
        lines.append(
            f"{_cut(p.name, 26):<26} {tid:>8} {p.samples:>7} "
            + " ".join(f"{_pct(x):>6}" for x in (f[HOLDING_GIL], f[GC], f[WAITING_GIL], f[NATIVE], f[IDLE]))
            + f"  {_top_label(session, p, top)}"
        )
    return lines


def render(recording: Recording, title: str = "gilty record") -> str:
    """The text report of a recording of several processes."""
    started = datetime.datetime.fromtimestamp(recording.start_time).strftime("%Y-%m-%d %H:%M:%S")
    out = []
    if recording.partial:
        out.append(f"*** {PARTIAL_MARKER}: {recording.partial_reason or 'the recording ended early'} ***")
    n = len(recording.sessions)
    follow = " and Python descendants" if recording.subprocesses else ""
    out.append(f"{title}: {n} process{'es' if n != 1 else ''}{follow}, started {started}, "
               f"{recording.duration_s or 0.0:.1f} s at {recording.rate_hz:g} Hz")
    if recording.command:
        out.append(f"command: {' '.join(recording.command)}")
    for note in recording.notes:
        out.append(f"hint: {note}")
    out.append("")
    role_of = roles(recording)
    out.append(PROCESS_HEADING)
    for s in recording.sessions:
        out.append(_process_row(s, role_of.get(s.target.pid, "")))
    for skipped in recording.skipped:
        out.append(f"skipped pid {skipped['pid']}: {skipped['reason']}")
    pooled = False
    verdicts: dict = {}
    for s in recording.sessions:
        out.append("")
        exited = f", exited at {s.exited_at:.1f} s" if s.exited_at is not None else ""
        out.append(
            f"Process {s.target.pid} ({role_of.get(s.target.pid, '')}), Python {s.target.python_version}{exited}: "
            f"{_cut(s.target.cmdline or s.target.executable, 60)}"
        )
        if not s.samples:
            out.append("  no samples")
            continue
        lines = _thread_lines(s)
        pooled = pooled or any("×" in line.split("  ")[0] for line in lines[1:])
        out += lines
        summary = summarise(s)
        if summary.verdict and summary.verdict.text:
            verdicts.setdefault(summary.verdict.text, []).append(s.target.pid)
    if pooled:
        out.append("")
        out.append(POOL_NOTE)
    out.append("")
    out.append("Verdict (per process)")
    for text, pids in verdicts.items():
        out.append(f"  pid {', '.join(map(str, pids))}: {text}")
    if recording.partial:
        out.append("")
        out.append(f"{PARTIAL_MARKER}: {recording.partial_reason or 'the recording ended early'}")
    return "\n".join(out) + "\n"


# -- the top frame ----------------------------------------------------------------------------

TOP_HEADING = f"{'THREAD':<24} {'TID':>7} {'HOLD':>5} {'WAIT':>5} {'NATIVE':>6} {'IDLE':>5} {'GC':>4}  TOP FUNCTION"


def render_top(
    recording: Recording,
    elapsed_s: float,
    sort: str = "hold",
    width: int = 80,
    height: int = 24,
    keys: bool = False,
) -> str:
    """One `gilty top` frame over the last window: at most ``height`` lines of at most ``width``.

    Processes and, within each, threads (pools on one line) are ordered by ``sort``; what does
    not fit is counted in a last "+N more" line.
    """
    sessions = [s for s in recording.sessions if s.samples]
    role_of = roles(recording)
    n = len(recording.sessions)
    help_text = " (h/w/c sort, q quits)" if keys else " (Ctrl-C to stop)"
    head = [
        _cut(f"gilty top: {n} process{'es' if n != 1 else ''}, {recording.rate_hz:g} Hz, {elapsed_s:.0f} s, "
             f"sort {sort}{help_text}", width),
    ]
    blocks = []
    for s in sessions:
        pools = thread_pools(s)
        top = top_function_overall(s, thread_states(s))
        pools.sort(key=lambda p: (-sort_value(p.fractions, sort), p.tids[0]))
        shares = process_shares(s)
        exited = " exited" if s.exited_at is not None else ""
        title = (
            f"pid {s.target.pid} {role_of.get(s.target.pid, '')}{exited}: GIL {percent(gil_utilisation(s))}, "
            f"{mean_waiting_threads(s):.1f} waiting, "
        )
        title = _cut(title + (s.target.cmdline or s.target.executable), width)
        rows = []
        for p in pools:
            f = p.fractions
            tid = str(p.tids[0]) if p.size == 1 else f"×{p.size}"
            row = (
                f"{_cut(p.name, 24):<24} {_cut(tid, 7):>7} {_pct(f[HOLDING_GIL] + f[GC]):>5} {_pct(f[WAITING_GIL]):>5} "
                f"{_pct(f[NATIVE]):>6} {_pct(f[IDLE]):>5} {_pct(f[GC]):>4}  "
            )
            rows.append(row + _cut(_top_label(s, p, top, short=True), width - len(row)))
        blocks.append((sort_value(shares, sort), s.target.pid, title, rows))
    blocks.sort(key=lambda b: (-b[0], b[1]))
    lines = head + [TOP_HEADING[:width]]
    budget = height - len(lines) - 1  # keep one line for "+N more"
    more_rows = 0
    more_procs = 0
    for _value, _pid, title, rows in blocks:
        if budget < 2:  # a process title alone says nothing: show it with at least one row
            more_procs += 1
            more_rows += len(rows)
            continue
        lines.append(title)
        budget -= 1
        shown = rows[:budget]
        lines += shown
        budget -= len(shown)
        more_rows += len(rows) - len(shown)
    if more_rows or more_procs:
        extra = f" in {more_procs} more process{'es' if more_procs != 1 else ''}" if more_procs else ""
        lines.append(_cut(f"+{more_rows} more thread line{'s' if more_rows != 1 else ''}{extra}", width))
    if not sessions:
        lines.append("no samples in the last window")
    return "\n".join(lines) + "\n"


def sort_key_for(char: str) -> Optional[str]:
    """The --sort key a key press selects (h, w, c), or None."""
    return {"h": "hold", "w": "wait", "c": "cpu"}.get(char.lower())
