"""Text renderings: the recording summary, one `gilty top` frame, and one `gilty dump` snapshot."""

from __future__ import annotations

import datetime
from typing import Optional

from gilty.report.labels import cut_name, cut_names
from gilty.report.recording import event_loops, readiness
from gilty.report.recording.text_exact import exact_sections
from gilty.sampling.analysis import Summary, summarise
from gilty.sampling.analysis.exact import summarise_exact
from gilty.sampling.analysis.functions import top_function_overall
from gilty.sampling.analysis.pooled import pooled_summary
from gilty.sampling.analysis.states import gil_utilisation, mean_waiting_threads, thread_states
from gilty.sampling.analysis.syscalls import idle_label
from gilty.sampling.analysis.wording import milliseconds, percent
from gilty.sampling.native_frames import native_stacks_line
from gilty.sampling.session import IDLE, WAITING_GIL, Recording, Session

PARTIAL_MARKER = "PARTIAL"
POOL_NOTE = "×N: N threads named alike (a pool) on one row: SAMPLES summed, shares averaged over its threads"
# Column headings for the seven states, in state-code order.
STATE_HEADINGS = ("HOLD", "GC", "WAIT", "NATIVE", "IDLE", "UNKNOWN", "CPUWAIT")
NAME_WIDTH = 26  # a pool's label: "ThreadPoolExecutor-0_# ×8"
# Shares that would print as "<1%" are left out of the detail sections (the JSON keeps them).
SHOWN_MIN = 0.005


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def _state_table(rows: list, extra_heading: Optional[str] = None) -> list:
    """rows: [(name, tid, samples, [fraction per state], extra text or None)] -> lines."""
    heading = f"{'THREAD':<{NAME_WIDTH}} {'TID':>8} {'SAMPLES':>8} " + " ".join(f"{h:>7}" for h in STATE_HEADINGS)
    if extra_heading:
        heading += f"  {extra_heading}"
    lines = [heading]
    names = cut_names([row[0] for row in rows], NAME_WIDTH)
    for (_name, tid, samples, fractions, extra), name in zip(rows, names):
        line = f"{name:<{NAME_WIDTH}} {tid:>8} {samples:>8} " + " ".join(f"{percent(f) if f else '-':>7}" for f in fractions)
        if extra:
            line += f"  {extra}"
        lines.append(line)
    return lines


def _held_note(states: list) -> list:
    """Said under a state table in which some holder was preempted: HOLD then counts it, as the GIL
    utilisation and exact mode's hold do, and CPUWAIT is what is left."""
    if not any(st.held_cpu_wait for st in states):
        return []
    return ["HOLD counts a holder preempted by the kernel (cpu_wait holding the GIL); CPUWAIT is waiting for a CPU without it"]


def _who(t) -> str:
    """``MainThread (tid 4243)``, or ``ThreadPoolExecutor-0_# ×8 (8 threads)`` for a pool merged."""
    return f"{t.name} ({t.size} threads)" if t.size > 1 else f"{t.name} (tid {t.tid})"


def _tid_cell(t) -> str:
    return f"×{t.size}" if t.size > 1 else str(t.tid)


def _header(summary: Summary, title: str) -> list:
    session = summary.session
    target = session.target
    started = datetime.datetime.fromtimestamp(session.start_time).strftime("%Y-%m-%d %H:%M:%S")
    errors = session.errors
    lines = []
    if session.partial:
        lines.append(f"*** {PARTIAL_MARKER}: {session.partial_reason or 'the recording ended early'} ***")
    lines.append(f"{title}: pid {target.pid}, Python {target.python_version} ({target.executable})")
    if session.command:
        lines.append(f"command: {' '.join(session.command)}")
    lines.append(
        f"started {started}, {session.duration_s:.1f} s at {session.rate_hz:g} Hz, {session.samples} samples, "
        f"switch interval {milliseconds(target.switch_interval_s)}"
    )
    lines.append(
        f"errors: {errors['torn_retried']} torn reads retried, {errors['torn_dropped']} dropped, "
        f"{errors.get('torn_partial', 0)} kept to their outer frames, "
        f"{errors['read_failed']} failed reads, {errors['late']} late samples"
    )
    native = native_stacks_line(errors)
    if native:
        lines.append(native)
    if errors.get("gil_flag_checked"):
        # 3.14+: the interpreter's own per-thread flag beside the GIL struct the states come from.
        checked, disagreed = errors["gil_flag_checked"], errors["gil_flag_disagreed"]
        lines.append(
            f"GIL cross-check: the threads' own holds_gil flag agreed with the GIL's holder in "
            f"{checked - disagreed} of {checked} thread samples ({percent((checked - disagreed) / checked)})"
        )
    from gilty.report.recording.text_processes import rate_warning

    warning = rate_warning(session)
    if warning:
        lines.append(warning)
    lines.append(
        f"GIL utilisation {percent(summary.gil_utilisation)} (garbage collection {percent(summary.gc_share)}), "
        f"{summary.mean_waiting_threads:.2f} threads waiting for the GIL on average"
    )
    if summary.saturation is not None:
        lines.append(summary.saturation.line())
    return lines


def _functions_section(summary: Summary) -> list:
    lines = ["Top functions (innermost frame, C with --native; share of the thread's samples)"]
    for t in summary.threads:
        lines.append(f"  {_who(t)}")
        for f in t.top_functions:
            # Idle is shown below as a breakdown by what the thread is blocked in.
            if f.state != "idle" and f.fraction >= SHOWN_MIN:
                lines.append(f"    {f.state:<12} {percent(f.fraction):>5}  {f.label()}")
        if t.states.fraction(IDLE) >= SHOWN_MIN:
            parts = [f"{idle_label(name)} {percent(share)}" for name, share in t.idle_syscalls.items() if share >= SHOWN_MIN]
            lines.append(f"    {'idle':<12} {percent(t.states.fraction(IDLE)):>5}  " + ", ".join(parts))
            idle_top = [f for f in t.top_functions if f.state == "idle" and f.fraction >= SHOWN_MIN][:3]
            for f in idle_top:
                lines.append(f"    {'':<12} {percent(f.fraction):>5}  in {f.label()}")
    return lines


def _blame_section(summary: Summary) -> list:
    """Per waiting thread: each holder's share of its waits, then that holder's functions."""
    waiting = [t for t in summary.threads if t.blame_counts and t.states.fraction(WAITING_GIL) >= SHOWN_MIN]
    if not waiting:
        return []
    lines = ["Who held the GIL while a thread waited for it (share of that thread's waits)"]
    for t in waiting:
        lines.append(f"  {_who(t)} waits {percent(t.states.fraction(WAITING_GIL))} of its samples:")
        # Holder totals from the untruncated counts; functions from the (top entries) blame list.
        totals: dict = {}
        for (holder, _function, _file), (n, _lines) in t.blame_counts.items():
            totals[holder] = totals.get(holder, 0) + n
        waited = sum(totals.values())
        for holder, n in sorted(totals.items(), key=lambda item: (-item[1], item[0] is None, item[0] or 0)):
            if n / waited < SHOWN_MIN:
                continue
            if holder is None:
                # Said once, so a reader does not take it for a thread gilty failed to see.
                lines.append(f"    {percent(n / waited):>5}  (no holder seen: the GIL was between holders, being handed over)")
                continue
            shown = summary.thread(holder)
            who = _who(shown) if shown is not None else f"{summary.session.thread_name(holder)} (tid {holder})"
            lines.append(f"    {percent(n / waited):>5}  {who}")
            for b in t.blame:
                if b.holder_tid == holder and b.fraction >= SHOWN_MIN:
                    lines.append(f"    {'':>5}    {percent(b.fraction):>5}  in {b.function_label()}")
    return lines


def _error_paths_section(summary: Summary) -> list:
    """Threads seen handling an exception, with the top functions they did it in."""
    handling = [t for t in summary.threads if t.handling_share >= SHOWN_MIN]
    if not handling:
        return []
    lines = ["Time in error paths (handling an exception: in `except`, or a `finally` run by one; share of the thread's samples)"]
    for t in sorted(handling, key=lambda t: (-t.handling_share, t.tid)):
        lines.append(f"  {cut_name(t.name, NAME_WIDTH):<{NAME_WIDTH}} {_tid_cell(t):>8} {percent(t.handling_share):>5}")
        for f in t.top_functions:
            share = f.handling_samples / t.samples if t.samples else 0.0
            if share >= SHOWN_MIN:
                lines.append(f"    {f.state:<12} {percent(share):>5}  in {f.label()}")
    return lines


def _convoy_section(summary: Summary) -> list:
    with_episodes = [t for t in summary.threads if t.convoy.episodes]
    if not with_episodes:
        return []
    lines = ["Wake-ups straight into a GIL wait (idle -> waiting_gil)"]
    for t in with_episodes:
        c = t.convoy
        ratio = f" = {c.switch_intervals:.1f} switch intervals" if c.switch_intervals is not None else ""
        flags = []
        if c.is_convoy:
            flags.append("CONVOY")
        if c.resolution_limited:
            flags.append("near sampling resolution")
        flag = f"  [{', '.join(flags)}]" if flags else ""
        episodes = "episode " if c.episodes == 1 else "episodes"
        lines.append(
            f"  {cut_name(t.name, NAME_WIDTH):<{NAME_WIDTH}} {_tid_cell(t):>8} {c.episodes:>6} {episodes}, mean wait "
            f"{milliseconds(c.mean_wait_s or 0.0)}{ratio}{flag}"
        )
    return lines


def _tasks_section(session: Session) -> list:
    """`record --tasks`: task-seconds by state and the most-awaited sites."""
    from gilty.report.labels import visible
    from gilty.report.recording import tasks as task_view

    data = task_view.report(session)
    if data is None:
        return []
    states = ", ".join(f"{k} {v:.2f} s" for k, v in sorted(data["state_seconds"].items(), key=lambda kv: -kv[1]))
    out = [f"asyncio tasks: {data['mean_tasks']:g} per pass over {data['passes']} passes; task-seconds: {states or 'none'}"]
    for site in data["await_sites"][:5]:
        out.append(
            f"  {site['share']:>6.1%}  awaiting {site['kind']} at {visible(site['function'])} "
            f"({visible(site['file'])}:{site['line']})"
        )
    dropped = sum(data["errors"].values())
    if dropped:
        out.append(f"  (reads that moved under gilty, left out: {', '.join(f'{k} {v}' for k, v in data['errors'].items() if v)})")
    return out


def render(session: Session, summary: Optional[Summary] = None, title: str = "gilty record") -> str:
    """The text summary of a recording."""
    summary = summary or summarise(session)
    out = _header(summary, title)
    out.append("")
    if not summary.threads:
        out.append("No samples were recorded.")
        return "\n".join(out) + "\n"
    # Pools on one row each, in every per-thread section; exact figures stay per thread.
    shown = pooled_summary(summary)
    out += _state_table([(t.name, _tid_cell(t), t.samples, t.states.table_fractions(), None) for t in shown.threads])
    out += _held_note([t.states for t in shown.threads])
    if any(t.size > 1 for t in shown.threads):
        out.append(POOL_NOTE)
    sections = (
        _functions_section(shown),
        _blame_section(shown),
        _convoy_section(shown),
        _error_paths_section(shown),
        exact_sections(summary),
        _tasks_section(session),
        event_loops.section(session),
        readiness.section(session),
    )
    for section in sections:
        if section:
            out.append("")
            out += section
    out.append("")
    out.append("Verdict")
    # One line, unwrapped: easy to grep, and the terminal wraps it anyway.
    out.append(f"  {summary.verdict.text if summary.verdict else ''}")
    if session.partial:
        out.append("")
        out.append(f"{PARTIAL_MARKER}: {session.partial_reason or 'the recording ended early'}")
    return "\n".join(out) + "\n"


def render_recording(recording: Recording) -> str:
    """The text report of a Recording: one process as always; several as a process table first."""
    if len(recording.sessions) == 1 and not recording.subprocesses:
        text = render(recording.sessions[0])
        return text + "".join(f"\nhint: {note}\n" for note in recording.notes)
    from gilty.report.recording import text_processes as console_processes  # several processes: a module of its own

    return console_processes.render(recording)


def render_top(window: Session, elapsed_s: float) -> str:
    """One `gilty top` frame: state shares of the last window, per thread, and its top function."""
    target = window.target
    from gilty.report.recording.text_processes import BUSY_MIN, fit_function, function_table

    states = thread_states(window)
    top = top_function_overall(window, states, busy_min=BUSY_MIN)
    lines = [
        f"gilty top: pid {target.pid}, Python {target.python_version}, {window.rate_hz:g} Hz, {elapsed_s:.0f} s (Ctrl-C to stop)",
        f"GIL utilisation {percent(gil_utilisation(window))}, "
        f"{mean_waiting_threads(window):.2f} threads waiting for the GIL, {window.samples} samples in the last "
        f"{window.duration_s:.1f} s",
    ]
    exact = summarise_exact(window)
    if exact is not None:
        lines.append(f"exact (uprobes): {exact.events} events in the last {exact.wall_s:.1f} s, {exact.lost} lost")
    loop = event_loops.top_line(window)
    if loop:
        lines.append(loop)
    ordered = sorted(states.values(), key=lambda st: (-st.holding, st.tid))
    rows = []
    for st in ordered:
        share = top.get(st.tid)
        extra = f"{fit_function(share.function, share.file, share.line, 60)} [{share.state}]" if share else ""
        e = exact.threads.get(st.tid) if exact is not None else None
        if e is not None:
            extra = f"exact hold {percent(e.hold_fraction)} wait {percent(e.wait_fraction + e.handoff_fraction)}  " + extra
        rows.append((window.thread_name(st.tid), st.tid, st.samples, st.table_fractions(), extra))
    lines += _state_table(rows, "TOP FUNCTION")
    lines += _held_note(ordered)
    functions = function_table(Recording.of(window), 10, 120)
    if functions:
        lines += [""] + functions
    return "\n".join(lines) + "\n"
