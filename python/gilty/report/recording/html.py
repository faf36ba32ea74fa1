"""One self-contained HTML page (``.html``): summary, flame graph, timeline, blame, convoys.

The page works offline: its CSS and JS (``report/html/``) are inlined, and the data is one
JSON document inside ``<script type="application/json">``. The JSON is escaped so that no
string in it (a function named ``</script>...``) can end that element, and the page's JS
builds every node with ``textContent``, never parsing data as HTML.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Optional

from gilty import __version__
from gilty.report.labels import command_text, process_label
from gilty.report.pictures import PictureOptions, merges, short_command
from gilty.report.recording import readiness
from gilty.report.recording import tasks as task_view
from gilty.report.recording.source_view import view_data as source_view_data
from gilty.report.recording.text_processes import BUSY_MIN, busiest_thread
from gilty.sampling.aggregate import ABSENT
from gilty.sampling.analysis import summarise
from gilty.sampling.analysis.functions import top_function_overall
from gilty.sampling.analysis.states import thread_states
from gilty.sampling.processes import roles
from gilty.sampling.session import STATE_NAMES, WAITING_GIL, Recording, Session
from gilty.sampling.stack_slots import slot_spans

# Bands per thread on the timeline; longer recordings are downsampled to this many.
MAX_BANDS = 2000
# Bands on the whole page: every band is an element the browser lays out (about 15 µs each in
# Chromium), so with many threads each gets fewer columns, though never fewer than MIN_BANDS.
PAGE_BANDS = 40000
MIN_BANDS = 200
# Stack counts over time, for selecting a time range on the timeline: each process's recording is cut
# into at most PAGE_SLOTS slots (whole stack slots of the recording, sampling/stack_slots.py), and a
# stack's samples are listed per slot it was seen in. Over PAGE_SLOT_VALUES (slot, samples) pairs on
# the page, the slots are made coarser (half as many) until it fits: page size and load time stay
# bounded whatever the recording's length.
PAGE_SLOTS = 512
MIN_PAGE_SLOTS = 16
PAGE_SLOT_VALUES = 150_000
_TOKEN = re.compile(r"/\*@(CSS|JS|DATA)@\*/")


def script_json(value) -> str:
    """JSON that is safe inside a <script> element: no `<`, `>` or `&` appears literally.

    JSON's ``\\u003c`` escapes read back as the same characters; U+2028/2029 are escaped by
    ``ensure_ascii``.
    """
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# -- data -------------------------------------------------------------------------------------


def band_limit(threads: int) -> int:
    """Bands per thread on a page of ``threads`` threads."""
    return max(MIN_BANDS, min(MAX_BANDS, PAGE_BANDS // max(threads, 1)))


def bands(session: Session, tid: int, duration: float, limit: Optional[int] = None) -> list:
    """[[start_s, end_s, state], ...] of one thread, at most ``limit`` (default MAX_BANDS).

    Over the limit, time is cut into ``limit`` equal slots, each showing the state that filled
    most of it, and neighbouring slots in one state are merged again.

    One pass over the thread's run columns, holding at most MAX_BANDS bands or the slots' shares:
    a long recording has millions of runs, and a list of them all cost more than the recording.
    """
    runs = session.thread_runs.get(tid)
    times = session.times
    if runs is None or not times:
        return []
    limit = MAX_BANDS if limit is None else limit
    slot = duration / limit if duration > 0 else 0.0
    n = len(times)
    tail = session.pass_end(n - 1)  # end of the last pass
    exact: list = []
    share = None  # per state, seconds in each slot; once the bands are over the limit

    def fold(start: float, end: float, state: int) -> None:
        seconds = share[state]
        i = min(int(start / slot), limit - 1)
        while i < limit and start < end:
            slot_end = (i + 1) * slot
            cut = end if end < slot_end else slot_end
            seconds[i] += cut - start
            start = cut
            i += 1

    # The band being grown: runs of one state that touch (an ABSENT gap or a syscall change
    # between them is not a new band) are one.
    cur, ps, pe = -1, 0.0, 0.0
    first = runs.start
    for passes, state in zip(runs.passes, runs.state):
        nxt = first + passes
        if state != ABSENT:
            start = times[first]
            if state == cur and abs(pe - start) < 1e-9:
                pe = times[nxt] if nxt < n else tail
            else:
                if cur >= 0:
                    if share is not None:
                        fold(ps, pe, cur)
                    else:
                        exact.append([ps, pe, cur])
                        if len(exact) > limit and slot > 0:
                            share = [[0.0] * limit for _ in STATE_NAMES]
                            for band in exact:
                                fold(*band)
                            exact = []
                cur, ps, pe = state, start, times[nxt] if nxt < n else tail
        first = nxt
    if cur >= 0:
        if share is not None:
            fold(ps, pe, cur)
        else:
            exact.append([ps, pe, cur])
    if share is None:
        return [[round(a, 6), round(b, 6), s] for a, b, s in exact]
    out: list = []
    for i, seconds in enumerate(zip(*share)):
        most = max(seconds)
        if most <= 0:
            continue
        state = seconds.index(most)
        a, b = round(i * slot, 6), round((i + 1) * slot, 6)
        if out and out[-1][2] == state and abs(out[-1][1] - a) < 1e-6:
            out[-1][1] = b
        else:
            out.append([a, b, state])
    return out


def slot_series(session: Session, limit: int) -> tuple:
    """(edges, {(tid, state, stack_id): [slot, samples, slot, samples, ...]}) with at most ``limit``
    slots: ``edges`` are the slots' bounds in seconds (one more than slots). Empty for a recording
    saved without stack slots."""
    spans = slot_spans(session)
    if not spans:
        return [], {}
    group = max(1, -(-len(spans) // max(limit, 1)))
    edges = [round(spans[i][0], 6) for i in range(0, len(spans), group)] + [round(spans[-1][1], 6)]
    series: dict = {}
    for k, counts in enumerate(session.stack_slots.counts):
        j = k // group
        for key, n in counts.items():
            values = series.get(key)
            if values is None:
                values = series[key] = []
            if values and values[-2] == j:
                values[-1] += n
            else:
                values += (j, n)
    return edges, series


def page_slots(recording: Recording) -> list:
    """``slot_series`` of each session, as fine as PAGE_SLOT_VALUES allows."""
    limit = PAGE_SLOTS
    while True:
        out = [slot_series(s, limit) for s in recording.sessions]
        values = sum(len(v) // 2 for _edges, series in out for v in series.values())
        if values <= PAGE_SLOT_VALUES or limit <= MIN_PAGE_SLOTS:
            return out
        limit //= 2


def _distribution(d: Optional[dict]) -> Optional[dict]:
    if not d:
        return None
    hist = sorted((int(lo), int(n)) for lo, n in d.get("log2_hist_ns", {}).items())
    return {k: d.get(k) for k in ("count", "p50_s", "p90_s", "p99_s", "max_s")} | {"hist": hist}


# Verdict kinds that mean trouble (red) and those worth a look (amber); the rest is fine (green).
BAD_KINDS = {"contention", "convoy"}
WARN_KINDS = {"gc", "native", "unknown", "few_samples", "empty"}


def severity(kinds: list) -> str:
    if BAD_KINDS & set(kinds):
        return "bad"
    if WARN_KINDS & set(kinds):
        return "warn"
    return "ok"


def _busiest(session: Session) -> Optional[dict]:
    states = thread_states(session)
    tid = busiest_thread(session, states)
    if tid is None:
        return None
    top = top_function_overall(session, states, busy_min=BUSY_MIN).get(tid)
    return {
        "tid": tid,
        "name": session.thread_name(tid),
        "states": states[tid].fractions(),
        "function": None if top is None or top.function is None else [top.function, top.file, top.line],
    }


def _add_positions(session: Session, frames: dict, frame_list: list) -> None:
    """A frame's instruction position most seen (3.11+) as its 4th item, for the tooltips
    ("file.py:12:5-17"); the first process's when several have the same frame."""
    for frame_id in session.frame_positions:
        index = frames.get(session.frames.get(frame_id))
        position = session.frame_position(frame_id)
        if index is not None and position is not None and len(frame_list[index]) == 3:
            frame_list[index].append(list(position))


def _process(
    session: Session, frames: dict, frame_list: list, role: str = "", limit: int = MAX_BANDS, slots: tuple = ([], {})
) -> dict:
    summary = summarise(session)
    duration = session.duration_s
    threads = []
    for t in summary.threads:
        exact = summary.exact.threads.get(t.tid) if summary.exact else None
        threads.append(
            {
                "tid": t.tid,
                "name": t.name,
                "samples": t.samples,
                "states": t.states.fractions(),
                "waiting_s": t.states.counts[WAITING_GIL] * session.period_s,
                "handling_exception_share": t.handling_share,
                "blame": [
                    {"holder": b.holder_name, "holder_tid": b.holder_tid, "function": b.function_label(), "fraction": b.fraction}
                    for b in t.blame
                ],
                "convoy": {
                    "episodes": t.convoy.episodes,
                    "mean_wait_s": t.convoy.mean_wait_s,
                    "switch_intervals": t.convoy.switch_intervals,
                    "is_convoy": t.convoy.is_convoy,
                },
                "exact": None
                if exact is None
                else {
                    "hold_s": exact.hold_s,
                    "wait_s": exact.wait_s,
                    "hold": _distribution(exact.hold),
                    "wait": _distribution(exact.wait),
                },
                "bands": bands(session, t.tid, duration, limit),
            }
        )
    samples = []
    edges, series = slots
    for (tid, state, stack_id), n in session.stack_counts().items():
        path = []
        for frame in reversed(session.stack(stack_id)):  # outermost first, as the tree is built
            index = frames.get(frame)
            if index is None:
                index = frames[frame] = len(frame_list)
                frame_list.append(list(frame))
            path.append(index)
        samples.append(([tid, state, path, n], series.get((tid, state, stack_id), [])))
    _add_positions(session, frames, frame_list)
    samples.sort(key=lambda item: item[0])
    gc = []
    if summary.exact:
        gc = [[c["start_s"], c["duration_s"], c.get("generation")] for c in summary.exact.collections]
    return {
        "pid": session.target.pid,
        "label": process_label(session),
        "command": command_text(session),
        "short_command": short_command(session.target.cmdline or session.target.executable or "") or "python",
        "role": role,
        "ppid": session.target.ppid,
        "busiest": _busiest(session),
        "severity": severity(summary.verdict.kinds) if summary.verdict else "ok",
        "python_version": session.target.python_version,
        "duration_s": duration,
        "rate_hz": session.rate_hz,
        "samples": session.samples,
        "timeline_note": session.timeline_note,  # set when a long recording's timeline was coarsened
        "partial_reason": session.partial_reason if session.partial else None,
        "gil_utilisation": summary.gil_utilisation,
        "gc_share": summary.gc_share,
        "mean_waiting_threads": summary.mean_waiting_threads,
        "verdict": summary.verdict.text if summary.verdict else "",
        "saturation": summary.saturation.line() if summary.saturation else None,
        # `record --free-threading`: the readiness verdict line (gilty.readiness), else None.
        "free_threading": readiness.verdict_line(session),
        "threads": threads,
        "stacks": [entry for entry, _slots in samples],
        # Per stack (same order), its samples per time slot: [slot, samples, slot, samples, ...].
        "stack_slots": [slots for _entry, slots in samples],
        "slot_edges": edges,
        "exact_gc": gc,
        "tasks": task_view.html_data(session),  # `record --tasks`: drawn by tasks.js
    }


def page_data(
    recording: Recording,
    load: Optional[dict] = None,
    specialization: Optional[dict] = None,
    options: Optional[PictureOptions] = None,
    memory: Optional[dict] = None,
) -> dict:
    frames: dict = {}
    frame_list: list = []
    role_of = roles(recording)
    limit = band_limit(sum(len(s.thread_runs) for s in recording.sessions))
    processes = [
        _process(s, frames, frame_list, role_of.get(s.target.pid, ""), limit, slots)
        for s, slots in zip(recording.sessions, page_slots(recording))
    ]
    options = options or PictureOptions()
    duration = recording.duration_s
    if duration is None:
        duration = max((p["duration_s"] for p in processes), default=0.0)
    return {
        "generator": f"gilty {__version__}",
        "states": list(STATE_NAMES),
        "rate_hz": recording.rate_hz,
        "duration_s": duration,
        "start_time": recording.start_time,
        "partial_reason": recording.partial_reason if recording.partial else None,
        "frames": frame_list,
        "processes": processes,
        # What the flame graph starts with: idle hidden unless --idle; workers merged (one tree for all).
        "options": {"idle": bool(options.idle), "merge_workers": merges(recording, options), "lines": bool(options.lines)},
        "load": load,  # a `gilty load` report (drawn by load.js), or None
        "specialization": specialization,  # a `gilty specialization` part (specialization.js), or None
        "memory": memory,  # a `gilty memory` part (memory.js, report/memory/html.py), or None
        # The hot functions' lines by state (source.js), or None without Python lines.
        "source_view": source_view_data(recording, options.source_functions, bool(options.idle)),
    }


# -- page -------------------------------------------------------------------------------------


def _asset(name: str) -> str:
    return resources.files("gilty.report").joinpath("html", name).read_text(encoding="utf-8")


def _inlined(name: str) -> str:
    text = _asset(name)
    # Our own CSS and JS must not end their <style>/<script> element early either.
    if "</" + "script" in text.lower() or "</" + "style" in text.lower():
        raise ValueError(f"{name} closes its own element")
    return text


def title(
    recording: Recording, specialization: Optional[dict] = None, load: Optional[dict] = None, memory: Optional[dict] = None
) -> str:
    if load is not None and load.get("kind") == "load" and load.get("urls"):
        # A load run is the page's subject, whatever recording of a step is drawn below it.
        return "gilty load: " + ", ".join(u["url"] for u in load["urls"])
    labels = [process_label(s) for s in recording.sessions]
    if not labels and specialization and specialization.get("processes"):
        return "gilty specialization: pid " + ", ".join(str(p["pid"]) for p in specialization["processes"])
    if not labels and memory is not None:
        return f"gilty memory: pid {memory['report']['master_pid']}"
    return "gilty: " + (labels[0] if len(labels) == 1 else f"{len(labels)} processes")


def render(
    recording: Recording,
    load: Optional[dict] = None,
    specialization: Optional[dict] = None,
    options: Optional[PictureOptions] = None,
    memory: Optional[dict] = None,
) -> str:
    """The page of a recording; with ``load`` (a `gilty load` JSON report) also the load part, with
    ``specialization`` (``specialization_html.report_data``) the specialization part, with ``memory``
    (``report.memory.html.page_part``) the memory part."""
    css, js = _inlined("report.css"), _inlined("dom.js") + "\n" + _inlined("source.js") + "\n" + _inlined("report.js")
    if load is not None:
        css, js = css + _inlined("load.css"), js + "\n" + _inlined("load.js")
    if specialization is not None:
        css, js = css + _inlined("specialization.css"), js + "\n" + _inlined("specialization.js")
    if memory is not None:
        css, js = css + _inlined("memory.css"), js + "\n" + _inlined("memory.js")
    if task_view.sessions_with_tasks(recording):
        js = js + "\n" + _inlined("tasks.js")
    parts = {"CSS": css, "JS": js, "DATA": script_json(page_data(recording, load, specialization, options, memory))}
    page = _asset("report.html").replace("@TITLE@", html.escape(title(recording, specialization, load, memory)))
    # One pass: text substituted in is never searched for tokens again.
    return _TOKEN.sub(lambda m: parts[m.group(1)], page)
