"""Text renderings of a Recording of several processes: the report (a process table, then each
process's threads with pools on one line) and the `gilty top` frame that fits a terminal.
"""

from __future__ import annotations

import datetime
import textwrap
from typing import Optional

from gilty.report.labels import cut_name, cut_names
from gilty.report.pictures import short_command
from gilty.sampling.analysis import summarise
from gilty.sampling.analysis.functions import top_function_overall
from gilty.sampling.analysis.pools import Pool, group_pools
from gilty.sampling.analysis.states import gil_utilisation, mean_waiting_threads, thread_states
from gilty.sampling.analysis.wording import percent
from gilty.sampling.native_frames import frame_text, native_stacks_line
from gilty.sampling.processes import roles
from gilty.sampling.session import (
    CPU_WAIT,
    GC,
    HOLDING_GIL,
    IDLE,
    NATIVE,
    NATIVE_ERROR_KEYS,
    STATE_NAMES,
    UNKNOWN,
    WAITING_GIL,
    Recording,
    Session,
)

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
        counts_of=lambda st: st.table_counts(),  # a preempted holder counts as holding
    )


def _top_label(session: Session, pool: Pool, top: dict) -> str:
    shares = [top[tid] for tid in pool.tids if tid in top]
    if not shares:
        return ""
    # A pool is named by a member at work, if any is: the busy function, not the idle wait.
    best = max(shares, key=lambda f: (f.state != "idle", f.samples))
    if best.function is None:
        return f"{best.label()} [{best.state}]"
    # The file's base name: a line has room for the function and where it is, not the whole path.
    return f"{frame_text(best.function, best.file, best.line, short=True)} [{best.state}]"


def _base(path: Optional[str]) -> str:
    return (path or "?").rsplit("/", 1)[-1]


# -- the report -------------------------------------------------------------------------------

# Every line of the text report fits this many characters (a wide terminal, a CI log).
REPORT_WIDTH = 120
# A thread not idle for this share of its samples is named by what it runs, not what it waits in.
BUSY_MIN = 0.01

PROCESS_HEADING = (
    f"{'PID':>7} {'ROLE':<6} {'SAMPLES':>7} {'GIL':>5}  {'BUSIEST THREAD':<20} "
    f"{'HOLD':>5} {'WAIT':>5} {'NATIVE':>6} {'IDLE':>5} {'CPU_WAIT':>8}  COMMAND"
)
PROCESS_NOTE = (
    "HOLD WAIT NATIVE IDLE CPU_WAIT: shares of the process's busiest thread (the one least idle); HOLD counts GC and\n"
    "a holder preempted by the kernel, as GIL does; CPU_WAIT is waiting for a CPU without the GIL"
)


def _command(session: Session) -> str:
    return short_command(session.target.cmdline or session.target.executable or "") or "python"


def busiest_thread(session: Session, states: dict) -> Optional[int]:
    """The thread least idle (most samples holding, waiting for the GIL or in native code).

    Ties go to the one holding the GIL more, then to the first seen.
    """
    best = None
    for tid in session.tids():
        st = states.get(tid)
        if st is None or not st.samples:
            continue
        busy = 1.0 - st.fraction(IDLE) - st.fraction(UNKNOWN)
        key = (round(busy, 6), round(st.holding / st.samples, 6))
        if best is None or key > best[0]:
            best = (key, tid)
    return None if best is None else best[1]


def _process_cells(session: Session, role: str) -> tuple:
    """(the row up to its command, the command) of the process table."""
    states = thread_states(session)
    tid = busiest_thread(session, states)
    name = ""
    f = [0.0] * len(STATE_NAMES)
    if tid is not None:
        f = states[tid].table_fractions()
        name = session.thread_name(tid)
    line = (
        f"{session.target.pid:>7} {_cut(role, 6):<6} {session.samples:>7} {percent(gil_utilisation(session)):>5}  "
        f"{cut_name(name, 20):<20} {_pct(f[HOLDING_GIL] + f[GC]):>5} {_pct(f[WAITING_GIL]):>5} {_pct(f[NATIVE]):>6} "
        f"{_pct(f[IDLE]):>5} {_pct(f[CPU_WAIT]):>8}  "
    )
    command = _command(session)
    if session.exited_at is not None:
        command = f"[exited at {session.exited_at:.1f} s] " + command
    return line, command


def tell_apart(commands: list, width: int) -> list:
    """Each command cut to ``width``; where two would read the same cut but differ, the words they
    share after the first few are left out (``…``) so that what tells them apart shows:
    ``python -m celery -A proj worker…-Q mail`` and ``…-Q billing``, not the same text twice."""
    cut = [_cut(c, width) for c in commands]
    out = []
    for i, c in enumerate(commands):
        twins = [o for j, o in enumerate(commands) if j != i and o != c and cut[j] == cut[i]]
        text = cut[i]
        if twins:
            words = c.split()
            k = 0  # words shared with every twin
            while k < len(words) and all(o.split()[k : k + 1] == [words[k]] for o in twins):
                k += 1
            if k > 1 and words[k - 1].startswith("-"):
                k -= 1  # the option goes with its value: "-Q mail", not "mail"
            tail = " ".join(words[k:])
            room = width - len(tail) - 1
            if k and room >= min(len(words[0]), 8):
                text = _cut(" ".join(words[:k])[:room] + "…" + tail, width)
        out.append(text)
    return out


# HOLD counts GC here, as in the process table: the room goes to CPU_WAIT, which completes the row.
THREAD_HEADING = (
    f"  {'THREAD':<26} {'TID':>8} {'SAMPLES':>7} "
    + " ".join(f"{h:>6}" for h in ("HOLD", "WAIT", "NATIVE", "IDLE"))
    + f" {'CPU_WAIT':>8}"
)


def _thread_lines(session: Session, width: int = REPORT_WIDTH) -> list:
    states = thread_states(session)
    top = top_function_overall(session, states, busy_min=BUSY_MIN)
    pools = sorted(thread_pools(session), key=lambda p: (-(1.0 - p.fractions[IDLE]), -sort_value(p.fractions, "hold"), p.tids[0]))
    lines = [THREAD_HEADING + "  TOP FUNCTION"]
    for p, name in zip(pools, cut_names([p.name for p in pools], 26)):
        tid = str(p.tids[0]) if p.size == 1 else f"×{p.size}"
        f = p.fractions
        line = (
            f"  {name:<26} {tid:>8} {p.samples:>7} "
            + " ".join(f"{_pct(x):>6}" for x in (f[HOLDING_GIL] + f[GC], f[WAITING_GIL], f[NATIVE], f[IDLE]))
            + f" {_pct(f[CPU_WAIT]):>8}  "
        )
        lines.append(line + _cut(_top_label(session, p, top), max(width - len(line), 10)))
    return lines


TOP_FUNCTIONS_SHOWN = 10


def function_rows(recording: Recording, skip_states: tuple = (IDLE,)) -> list:
    """The innermost Python functions of every process's samples, most samples first.

    [(samples, {state code: samples}, (function, file, line of most samples), {pid})]; samples
    without a Python stack and those in ``skip_states`` are left out. One function of several
    processes (forked workers run the same code) is one row.
    """
    rows: dict = {}
    for s in recording.sessions:
        for (_tid, state, stack_id), n in s.counts.items():
            if state in skip_states:
                continue
            frame = s.innermost_frame(stack_id)
            if frame is None:
                continue
            function, file, line = frame
            entry = rows.setdefault((function, file), [0, {}, {}, set()])
            entry[0] += n
            entry[1][state] = entry[1].get(state, 0) + n
            entry[2][line] = entry[2].get(line, 0) + n
            entry[3].add(s.target.pid)
    out = []
    for (function, file), (n, by_state, lines, pids) in rows.items():
        line = max(lines, key=lines.__getitem__)
        out.append((n, by_state, (function, file, line), pids))
    out.sort(key=lambda r: (-r[0], str(r[2])))
    return out


def _pids_text(pids: set, role_of: dict) -> str:
    """``pid 4212``, ``4 workers``, ``master``, ``3 processes``: which processes ran a function."""
    ordered = sorted(pids)
    roles_seen = {role_of.get(p, "") for p in ordered}
    role = roles_seen.pop() if len(roles_seen) == 1 else ""
    if len(ordered) == 1:
        return f"pid {ordered[0]}"
    return f"{len(ordered)} {role}s" if role else f"{len(ordered)} processes"


FUNCTION_HEADING = f"  {'SAMPLES':>8} {'SHARE':>6} {'HOLD':>6} {'WAIT':>6} {'NATIVE':>6} {'CPU_WAIT':>8}  {'IN':<12} FUNCTION"


def top_function_lines(recording: Recording, limit: int = TOP_FUNCTIONS_SHOWN, width: int = REPORT_WIDTH) -> list:
    """The "Top functions" section: what every process's threads ran or waited in, idle left out."""
    rows = function_rows(recording)
    if not rows:
        return []
    role_of = roles(recording)
    total = sum(r[0] for r in rows)
    lines = [
        "Top functions (innermost Python frame, idle left out; SHARE of the rest; HOLD counts GC; CPU_WAIT: no CPU)",
        FUNCTION_HEADING,
    ]
    for n, by_state, (function, file, line), pids in rows[:limit]:
        share = lambda *codes: _pct(sum(by_state.get(c, 0) for c in codes) / n)  # noqa: E731, B023 - used within its iteration
        text = (
            f"  {n:>8} {percent(n / total):>6} {share(HOLDING_GIL, GC):>6} {share(WAITING_GIL):>6} {share(NATIVE):>6} "
            f"{share(CPU_WAIT):>8}  "
        )
        text += f"{_cut(_pids_text(pids, role_of), 12):<12} "
        lines.append(text + _cut(frame_text(function, file, line, short=True), max(width - len(text), 10)))
    if len(rows) > limit:
        lines.append(f"  ... {len(rows) - limit} more functions (the JSON and HTML reports have them all)")
    return lines


def _headline(recording: Recording, role_of: dict) -> Optional[str]:
    """Which process and thread did the most, in one line: the first thing a reader wants."""
    best = None
    for s in recording.sessions:
        states = thread_states(s)
        tid = busiest_thread(s, states)
        if tid is None:
            continue
        st = states[tid]
        key = (round(1.0 - st.fraction(IDLE) - st.fraction(UNKNOWN), 6), st.holding / st.samples)
        if best is None or key > best[0]:
            best = (key, s, tid, st)
    if best is None:
        return None
    _key, s, tid, st = best
    role = role_of.get(s.target.pid, "")
    top = top_function_overall(s, thread_states(s), busy_min=BUSY_MIN).get(tid)
    where = (
        f"\n  mostly in {frame_text(top.function, top.file, top.line, short=True)} [{top.state}]" if top and top.function else ""
    )
    return (
        f"Busiest: pid {s.target.pid}{' (' + role + ')' if role else ''} {s.thread_name(tid)} (tid {tid}): "
        f"GIL held {percent(st.hold_fraction)}, waited {percent(st.fraction(WAITING_GIL))}, "
        f"native {percent(st.fraction(NATIVE))}, idle {percent(st.fraction(IDLE))}{where}"
    )


def _fit(lines: list, width: int) -> list:
    """Lines longer than ``width`` (verdicts, hints) wrapped, continued with an indent."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip(" "))
        out += textwrap.wrap(
            line, width, initial_indent="", subsequent_indent=" " * (indent + 4), break_long_words=True, break_on_hyphens=False
        ) or [line[:width]]
    return out


def render(recording: Recording, title: str = "gilty record") -> str:
    """The text report of a recording of several processes.

    First screen: the headline (busiest process and thread), the process table (role, busiest
    thread's state split, a command line that tells them apart), then the top functions; the
    threads of each process after that. Every line fits REPORT_WIDTH.
    """
    started = datetime.datetime.fromtimestamp(recording.start_time).strftime("%Y-%m-%d %H:%M:%S")
    out = []
    if recording.partial:
        out.append(f"*** {PARTIAL_MARKER}: {recording.partial_reason or 'the recording ended early'} ***")
    n = len(recording.sessions)
    follow = " and Python descendants" if recording.subprocesses else ""
    out.append(
        f"{title}: {n} process{'es' if n != 1 else ''}{follow}, started {started}, "
        f"{recording.duration_s or 0.0:.1f} s at {recording.rate_hz:g} Hz"
    )
    if recording.command:
        out.append(_cut(f"command: {' '.join(recording.command)}", REPORT_WIDTH))
    for note in recording.notes:
        out.append(f"hint: {note}")
    out += _rate_warnings(recording)
    native = native_stacks_line(_native_errors(recording))
    if native:
        out.append(native)
    role_of = roles(recording)
    headline = _headline(recording, role_of)
    if headline:
        out += headline.split("\n")
    out.append("")
    out.append(PROCESS_HEADING)
    cells = [_process_cells(s, role_of.get(s.target.pid, "")) for s in recording.sessions]
    if cells:
        width = max(REPORT_WIDTH - max(len(line) for line, _c in cells), 10)
        for (line, _c), command in zip(cells, tell_apart([c for _l, c in cells], width)):
            out.append(line + command)
    for skipped in recording.skipped:
        out.append(f"skipped pid {skipped['pid']}: {skipped['reason']}")
    out += PROCESS_NOTE.split("\n")
    functions = top_function_lines(recording)
    if functions:
        out.append("")
        out += functions
    pooled = False
    verdicts: dict = {}
    for s in recording.sessions:
        out.append("")
        exited = f", exited at {s.exited_at:.1f} s" if s.exited_at is not None else ""
        role = role_of.get(s.target.pid, "")
        out.append(
            _cut(
                f"Process {s.target.pid}{' (' + role + ')' if role else ''}, Python {s.target.python_version}{exited}: "
                f"{_command(s)}",
                REPORT_WIDTH,
            )
        )
        if not s.samples:
            out.append("  no samples")
            continue
        lines = _thread_lines(s)
        pooled = pooled or any("×" in line[:38] for line in lines[1:])
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
    return "\n".join(_fit(out, REPORT_WIDTH)) + "\n"


def _native_errors(recording: Recording) -> dict:
    """`record --native`'s counters summed over the processes (none without `--native`)."""
    sessions = [s.errors for s in recording.sessions if "native_matched" in s.errors]
    return {key: sum(int(e.get(key, 0)) for e in sessions) for key in NATIVE_ERROR_KEYS} if sessions else {}


def rate_warning(session: Session) -> Optional[str]:
    """One line when passes were missed enough that the rate achieved is under 90 % of the rate asked."""
    late = int(session.errors.get("late", 0))
    if not late or not session.samples or not session.duration_s:
        return None
    effective = session.samples / session.duration_s
    if effective >= 0.9 * session.rate_hz:
        return None
    return (
        f"warning: pid {session.target.pid} missed {late} passes: effective rate {effective:.0f} Hz of "
        f"{session.rate_hz:g} Hz asked (the sampler could not keep up; lower --rate or record fewer processes)"
    )


def _rate_warnings(recording: Recording) -> list:
    out = [w for w in (rate_warning(s) for s in recording.sessions) if w]
    if len(out) > 3:
        out = out[:2] + [f"warning: {len(out) - 2} more processes missed passes (the JSON report's errors count them)"]
    return out


# -- the top frame ----------------------------------------------------------------------------

TOP_HEADING = f"{'THREAD':<18} {'TID':>7} {'HOLD':>5} {'WAIT':>5} {'NATIVE':>6} {'IDLE':>5}  TOP FUNCTION"
FUNCTIONS_HEADING = f"{'%OWN':>6} {'%TOTAL':>6}  FUNCTION (not-idle samples of every process in the window)"


def fit_function(function: Optional[str], file: Optional[str], line: Optional[int], width: int) -> str:
    """``function (file.py:line)`` in ``width``: the location goes before the function name is cut."""
    if function is None:
        return _cut("(no Python stack)", width)
    for text in (f"{function} ({_base(file)}:{line})", f"{function} ({_base(file)})", function) if file else (function,):
        if len(text) <= width:
            return text
    return _cut(function, width)


def function_table(recording: Recording, rows: int, width: int) -> list:
    """py-spy top's table: each function's share of the not-idle samples with it innermost (%OWN)
    and anywhere on the stack (%TOTAL), most own time first."""
    from gilty.sampling.analysis.difference import functions

    own, anywhere, total = functions(recording)
    if not total or rows < 1:
        return []
    ranked = sorted(anywhere, key=lambda k: (-own.get(k, 0), -anywhere[k], k))[:rows]
    out = [_cut(FUNCTIONS_HEADING, width)]
    for name in ranked:
        head = f"{percent(own.get(name, 0) / total):>6} {percent(anywhere[name] / total):>6}  "
        out.append(head + _cut(name, width - len(head)))
    return out


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
    not fit is counted in a "+N more" line. Below them, room permitting, py-spy top's table of
    functions by own and total time.
    """
    sessions = [s for s in recording.sessions if s.samples]
    role_of = roles(recording)
    n = len(recording.sessions)
    help_text = " (h/w/c sort, q quits)" if keys else " (Ctrl-C to stop)"
    head = [
        _cut(
            f"gilty top: {n} process{'es' if n != 1 else ''}, {recording.rate_hz:g} Hz, {elapsed_s:.0f} s, "
            f"sort {sort}{help_text}",
            width,
        ),
    ]
    blocks = []
    for s in sessions:
        pools = thread_pools(s)
        top = top_function_overall(s, thread_states(s), busy_min=BUSY_MIN)
        pools.sort(key=lambda p: (-sort_value(p.fractions, sort), p.tids[0]))
        shares = process_shares(s)
        exited = " exited" if s.exited_at is not None else ""
        title = (
            f"pid {s.target.pid} {role_of.get(s.target.pid, '')}{exited}: GIL {percent(gil_utilisation(s))}, "
            f"{mean_waiting_threads(s):.1f} waiting, "
        )
        title = _cut(title + _command(s), width)
        rows = []
        # Names cut keep their ends: "ThreadPoolE~0_# ×8", never eight rows of one stem.
        for p, name in zip(pools, cut_names([p.name for p in pools], 18)):
            f = p.fractions
            tid = str(p.tids[0]) if p.size == 1 else f"×{p.size}"
            row = (
                f"{name:<18} {_cut(tid, 7):>7} {_pct(f[HOLDING_GIL] + f[GC]):>5} {_pct(f[WAITING_GIL]):>5} "
                f"{_pct(f[NATIVE]):>6} {_pct(f[IDLE]):>5}  "
            )
            members = [top[t] for t in p.tids if t in top]
            best = max(members, key=lambda x: (x.state != "idle", x.samples)) if members else None
            label = fit_function(best.function, best.file, best.line, width - len(row)) if best else ""
            rows.append(row + label)
        from gilty.report.recording.event_loops import top_line  # an asyncio loop's lag and the code under it

        loop = top_line(s)
        if loop:
            rows.insert(0, _cut(loop, width))
        blocks.append((sort_value(shares, sort), s.target.pid, title, rows))
    blocks.sort(key=lambda b: (-b[0], b[1]))
    lines = head + [TOP_HEADING[:width]]
    # A third of the screen (at least 4 lines) for the function table when there is room.
    table_rows = max(4, (height - len(lines)) // 3) if height - len(lines) >= 12 else 0
    functions = function_table(recording, table_rows - 2, width) if table_rows else []
    budget = height - len(lines) - 1 - (len(functions) + 1 if functions else 0)  # one line for "+N more"
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
    if functions:
        lines.append("")
        lines += functions
    return "\n".join(lines) + "\n"


def sort_key_for(char: str) -> Optional[str]:
    """The --sort key a key press selects (h, w, c), or None."""
    return {"h": "hold", "w": "wait", "c": "cpu"}.get(char.lower())
