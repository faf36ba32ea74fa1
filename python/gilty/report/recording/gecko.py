"""The Firefox Profiler's Gecko profile format (``.gecko.json``), with gilty's thread states as markers.

Open it at profiler.firefox.com, *Load a profile from file*: its importer reads the Gecko profile
format (the JSON Firefox's own profiler emits) and upgrades any older version to its current one
one step at a time, so the file is written as **version 27** (the first whose frame table has no
``optimizations`` column; the upgrades after it, to 36 as of late 2026, change counters and marker
field types, or add an empty ``sources`` table (33), none of which this file has).

What is filled:

- ``meta``: ``version`` 27, ``interval`` (the sampling period, ms), ``startTime`` (the recording's
  start, ms since the epoch; every time in the file is ms after it), ``shutdownTime`` null,
  ``profilingStartTime`` 0 and ``profilingEndTime`` (the recording's length), ``processType`` 0,
  ``product`` ("gilty VERSION"), ``platform``, ``oscpu``, ``sampleUnits`` (below),
  ``stackwalk``/``debug``/``gcpoison``/``asyncstack`` 0, ``presymbolicated`` true (the frames are
  named already: the viewer asks no symbol server), ``categories`` (one per thread state, below) and
  ``markerSchema`` (below); top-level ``libs``, ``pages``, ``pausedRanges`` and ``processes`` empty.
- ``threads``: one per (process, thread) sampled, flat (several processes are told apart by ``pid``,
  all on the recording's time axis): ``name`` (the thread's name), ``tid``, ``pid``, ``processType``
  "default", ``processName`` (``python PID command``), ``registerTime`` (its first sample),
  ``unregisterTime`` null, and the tables, each ``{schema, data}`` with ``schema`` naming the column
  of each field: ``samples`` (stack, time, eventDelay: 0, threadCPUDelta), ``stackTable`` (prefix,
  frame), ``frameTable`` (location, relevantForJS, innerWindowID, implementation, line, column,
  category, subcategory), ``markers`` (name, startTime, endTime, phase, category, data), and the
  thread's ``stringTable``, which ``location`` and marker ``name`` index.

States, three ways, on each thread's track:

- **samples**: one per kept sampling pass, its stack rooted at a frame named after the state
  (``holding_gil``, ``waiting_gil``, ... as in every other format), every frame of it in that
  state's **category**, so the track's activity graph and the call tree are coloured by state (idle
  in the "Idle" category, which the viewer leaves undrawn), and its height is CPU use: a sample's
  ``threadCPUDelta`` (``meta.sampleUnits``: µs) is the whole time since the previous pass when it
  ran on a CPU (holding the GIL, gc, native), else 0, an estimate at the sampling rate like every
  share gilty reports; Python frames are located ``function (file:line)`` (the viewer's own form for
  interpreted frames: its call tree then shows the function and file), C frames of ``--native``
  ``function (in library)``;
- **``GilState`` markers**: one interval marker per run of consecutive passes in one state, named
  after the state, from its first pass to the end of its last (``data``: ``state``, ``samples``, and
  ``syscall`` for ``idle``), shown in the track, the marker chart and the marker table: a thread's
  markers tile its time, so per state they add up to its samples times the period;
- **``OnCpu`` markers** (``on_cpu``): the stretches a thread ran on a CPU, holding the GIL, in GC or
  in C code without it (runs of those states, merged).

A long recording's coarsened timeline (docs/formats.md) gives one sample per kept pass; markers
keep their whole spans. Asyncio tasks and exact (uprobe) traces are not in this format.
"""

from __future__ import annotations

import json
import platform
from typing import Optional

from gilty import __version__
from gilty.report.labels import command_text, state_name
from gilty.report.recording.chrome_trace import _pieces, _slot_stacks
from gilty.sampling.native_frames import is_native, native_parts
from gilty.sampling.session import GC, HOLDING_GIL, IDLE, NATIVE, NO_STACK, Recording, Session

GECKO_VERSION = 27
MS = 1000.0
US = 1e6
ON_CPU = "on_cpu"
ON_CPU_STATES = (HOLDING_GIL, GC, NATIVE)
STATE_SCHEMA = "GilState"
CPU_SCHEMA = "OnCpu"

# Category 0 is grey, which the viewer takes as its default; then one per state, by state name.
# Colours are from the viewer's own list; "Idle" is the name the viewer leaves out of the graph.
CATEGORIES = (
    ("Other", "grey", None),
    ("Holding the GIL", "red", "holding_gil"),
    ("GC", "purple", "gc"),
    ("Waiting for the GIL", "orange", "waiting_gil"),
    ("Native (GIL released)", "blue", "native"),
    ("Idle", "transparent", "idle"),
    ("Unknown", "grey", "unknown"),
    ("Waiting for a CPU", "yellow", "cpu_wait"),
)
CATEGORY_OF = {state: i for i, (_name, _colour, state) in enumerate(CATEGORIES) if state}

SAMPLES_SCHEMA = {"stack": 0, "time": 1, "eventDelay": 2, "threadCPUDelta": 3}
STACK_SCHEMA = {"prefix": 0, "frame": 1}
FRAME_SCHEMA = {
    "location": 0,
    "relevantForJS": 1,
    "innerWindowID": 2,
    "implementation": 3,
    "line": 4,
    "column": 5,
    "category": 6,
    "subcategory": 7,
}
MARKER_SCHEMA = {"name": 0, "startTime": 1, "endTime": 2, "phase": 3, "category": 4, "data": 5}
INTERVAL = 1  # a marker's phase: it has a start and an end time

MARKER_SCHEMAS = [
    {
        "name": STATE_SCHEMA,
        "tooltipLabel": "{marker.data.state}",
        "tableLabel": "{marker.data.state} ({marker.data.samples} samples)",
        "chartLabel": "{marker.data.state}",
        "display": ["marker-chart", "marker-table", "timeline-overview"],
        "data": [
            {"key": "state", "label": "State", "format": "string", "searchable": True},
            {"key": "samples", "label": "Samples", "format": "integer"},
            {"key": "syscall", "label": "Blocked in", "format": "string", "searchable": True},
            {"label": "Description", "value": "gilty's thread state over consecutive samples (docs/states.md)"},
        ],
    },
    {
        "name": CPU_SCHEMA,
        "tooltipLabel": "on CPU",
        "tableLabel": "on CPU ({marker.data.samples} samples)",
        "chartLabel": "on CPU",
        "display": ["marker-chart", "marker-table"],
        "data": [
            {"key": "samples", "label": "Samples", "format": "integer"},
            {"label": "Description", "value": "running on a CPU: holding the GIL, in GC, or in C code without it"},
        ],
    },
]


def category(state: int) -> int:
    return CATEGORY_OF.get(state_name(state), 0)


def ms(seconds: float) -> float:
    return round(seconds * MS, 6)  # to the nanosecond


class _Thread:
    """One Gecko thread being built: its string, frame and stack tables, samples and markers."""

    def __init__(self, session: Session, tid: int) -> None:
        self.session = session
        self.tid = tid
        self.strings: list = []
        self._string_index: dict = {}
        self.frames: list = []
        self._frame_index: dict = {}
        self.stacks: list = []
        self._stack_index: dict = {}
        self._sample_stacks: dict = {}  # (state, stack_id) -> stack index
        self.samples: list = []
        self.markers: list = []

    def string(self, text: str) -> int:
        found = self._string_index.get(text)
        if found is None:
            found = self._string_index[text] = len(self.strings)
            self.strings.append(text)
        return found

    def _frame(self, key: tuple, location: str, line: Optional[int], column: Optional[int], cat: int) -> int:
        found = self._frame_index.get(key)
        if found is None:
            found = self._frame_index[key] = len(self.frames)
            self.frames.append([self.string(location), False, None, None, line, column, cat, 0])
        return found

    def _python_frame(self, frame_id: int, cat: int) -> int:
        function, file, line = self.session.frames[frame_id]
        if is_native(line):
            library, source, source_line = native_parts(file)
            location = f"{function} (in {library.rsplit('/', 1)[-1] or '?'})"
            return self._frame(("f", frame_id, cat), location, source_line, None, cat)
        position = self.session.frame_position(frame_id)
        column = position[2] + 1 if position is not None and position[2] is not None else None
        shown = line if line is not None and line >= 0 else 0
        location = f"{function} ({file}:{shown})"
        return self._frame(("f", frame_id, cat), location, line if line is not None and line >= 0 else None, column, cat)

    def _stack(self, prefix: Optional[int], frame: int) -> int:
        found = self._stack_index.get((prefix, frame))
        if found is None:
            found = self._stack_index[(prefix, frame)] = len(self.stacks)
            self.stacks.append([prefix, frame])
        return found

    def sample_stack(self, state: int, stack_id: int) -> int:
        """The stack index of (state, Python stack): the state's frame at the root, outermost first."""
        found = self._sample_stacks.get((state, stack_id))
        if found is None:
            cat = category(state)
            name = state_name(state)
            found = self._stack(None, self._frame(("state", name), name, None, None, cat))
            if stack_id != NO_STACK:
                for frame_id in reversed(self.session.stacks.get(stack_id, ())):
                    found = self._stack(found, self._python_frame(frame_id, cat))
            self._sample_stacks[(state, stack_id)] = found
        return found

    def marker(self, name: str, start_ms: float, end_ms: float, cat: int, data: dict) -> None:
        self.markers.append([self.string(name), start_ms, end_ms, INTERVAL, cat, data])


def _thread(session: Session, tid: int, runs: list, slot_stacks: tuple, offset: float) -> dict:
    thread = _Thread(session, tid)
    cpu: Optional[list] = None  # the open on-CPU stretch: [first pass, end pass, samples]

    def close_cpu() -> None:
        first, end, n = cpu
        start, stop = ms(offset + session.pass_start(first)), ms(offset + session.pass_end(end - 1))
        thread.marker(ON_CPU, start, stop, 0, {"type": CPU_SCHEMA, "samples": n})

    for run in runs:
        _tid, first, passes, state, _stack_id, nr = run
        running = state in ON_CPU_STATES
        for start, n, stack_id in _pieces([run], *slot_stacks):
            stack = thread.sample_stack(state, stack_id)
            for i in range(start, start + n):
                # CPU since the previous pass (µs): all of it when this sample ran on a CPU. (Since
                # the previous pass, not this thread's previous sample: a thread not seen in between
                # is not said to have run all along.)
                cpu_us = round((session.pass_start(i) - session.pass_start(i - 1)) * US, 3) if running and i else 0
                thread.samples.append([stack, ms(offset + session.pass_start(i)), 0, cpu_us])
        name = state_name(state)
        data = {"type": STATE_SCHEMA, "state": name, "samples": passes}
        if state == IDLE:
            data["syscall"] = session.syscall_label(nr)
        begin, end = ms(offset + session.pass_start(first)), ms(offset + session.pass_end(first + passes - 1))
        thread.marker(name, begin, end, category(state), data)
        if state in ON_CPU_STATES:
            if cpu is not None and cpu[1] == first:
                cpu[1] += passes
                cpu[2] += passes
            else:
                if cpu is not None:
                    close_cpu()
                cpu = [first, first + passes, passes]
        elif cpu is not None:
            close_cpu()
            cpu = None
    if cpu is not None:
        close_cpu()
    return {
        "name": session.thread_name(tid),
        "processType": "default",
        "processName": f"python {session.target.pid} {command_text(session)}",
        "tid": tid,
        "pid": session.target.pid,
        "registerTime": thread.samples[0][1] if thread.samples else 0.0,
        "unregisterTime": None,
        "samples": {"schema": SAMPLES_SCHEMA, "data": thread.samples},
        "stackTable": {"schema": STACK_SCHEMA, "data": thread.stacks},
        "frameTable": {"schema": FRAME_SCHEMA, "data": thread.frames},
        "markers": {"schema": MARKER_SCHEMA, "data": thread.markers},
        "stringTable": thread.strings,
    }


def session_threads(session: Session, offset: float) -> list:
    by_tid: dict = {}
    for run in session.iter_runs():
        by_tid.setdefault(run[0], []).append(run)
    slot_stacks = _slot_stacks(session)
    return [_thread(session, tid, by_tid[tid], slot_stacks, offset) for tid in session.tids() if tid in by_tid]


def recording_length(recording: Recording) -> float:
    """Seconds from the recording's start to the end of its last process's last pass."""
    ends = [recording.duration_s or 0.0]
    for s in recording.sessions:
        offset = max(s.start_time - recording.start_time, 0.0)
        if len(s.times):
            ends.append(offset + s.pass_end(len(s.times) - 1))
    return max(ends)


def profile(recording: Recording) -> dict:
    threads = []
    for session in recording.sessions:
        # Processes followed later start later on the shared time axis.
        threads.extend(session_threads(session, max(session.start_time - recording.start_time, 0.0)))
    return {
        "meta": {
            "version": GECKO_VERSION,
            "interval": 1000.0 / recording.rate_hz,
            "startTime": recording.start_time * MS,
            "shutdownTime": None,
            "profilingStartTime": 0.0,
            "profilingEndTime": ms(recording_length(recording)),
            "processType": 0,
            "product": f"gilty {__version__}",
            "platform": platform.system(),
            "stackwalk": 0,
            "debug": 0,
            "gcpoison": 0,
            "asyncstack": 0,
            "oscpu": f"{platform.system()} {platform.machine()}",
            "presymbolicated": True,
            "sampleUnits": {"time": "ms", "eventDelay": "ms", "threadCPUDelta": "µs"},
            "categories": [{"name": name, "color": colour, "subcategories": ["Other"]} for name, colour, _s in CATEGORIES],
            "markerSchema": MARKER_SCHEMAS,
        },
        "libs": [],
        "pages": [],
        "pausedRanges": [],
        "processes": [],
        "threads": threads,
    }


def render(recording: Recording) -> str:
    return json.dumps(profile(recording), separators=(",", ":")) + "\n"
