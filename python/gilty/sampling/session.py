"""The recorded data model: target metadata plus the aggregated samples, merged from the sampler's batches.

Samples are never kept one per (pass, thread): the native sampler folds them into runs (a thread's
stretch of consecutive passes in one state and syscall), sample counts per (thread, state, stack),
GIL blame counts and one flag byte per pass (``crates/gilty-core/src/sampling/aggregate.rs``). Each thread's
runs are kept column-wise in ``array`` buffers (11 bytes a run), already in pass order, so memory
grows with state changes, not samples, and reading them in order needs no sort.

That timeline (pass times, pass flags, runs) is kept within a budget: a long recording's is
coarsened (``timeline.py``), its passes then being every ``timeline_step``-th pass ("ticks");
what needs every pass or run (sample and pass-flag counts, ``run_folds.py``) is counted apart.
"""

from __future__ import annotations

import json
import math
import time
from array import array
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Optional

from gilty.sampling.aggregate import ABSENT, PASS_GIL_HELD, PASS_HOLDER_CPU_WAIT, PASS_IN_GC, RUN_COLUMNS
from gilty.sampling.run_folds import RunFolds
from gilty.sampling.stack_slots import StackSlots
from gilty.sampling.thread_states import CPU_WAIT, GC, HOLDING_GIL, IDLE, NATIVE, STATE_NAMES, UNKNOWN, WAITING_GIL  # noqa: F401
from gilty.sampling.timeline import MIN_TICKS, budget_from_env, decimate, resolution_note, ticks_before

NO_STACK = -1  # stack_id of a sample without a Python stack
NO_SYSCALL = -1  # syscall of a sample that is running or where it does not apply
NO_HOLDER = -1  # holder tid of a waiting_gil sample taken while no thread held the GIL (native form)

# torn_partial: stacks whose inner frames kept moving, kept as their outer frames under "(inner frames moving)".
ERROR_KEYS = ("torn_retried", "torn_dropped", "torn_partial", "read_failed", "late")
# `record --native` only: samples with a native part, those cut short, those missing it, kernel samples lost;
# the missing by why (native::record::NativeCounts), and samples of threads with no Python stack given their C stack.
NATIVE_MISSING_REASONS = ("native_missing_moved", "native_missing_no_sample", "native_missing_unmatched")
NATIVE_ERROR_KEYS = (
    ("native_matched", "native_partial", "native_missing", "native_lost") + NATIVE_MISSING_REASONS + ("native_bare",)
)
# 3.14+ only: thread samples whose own `holds_gil` flag was compared with the GIL struct, and disagreed.
GIL_FLAG_KEYS = ("gil_flag_checked", "gil_flag_disagreed")

SESSION_FORMAT_VERSION = 2

# Distinct instruction positions kept per frame (a line rarely holds more instructions than this
# that a thread stands on; past it, new ones are not counted).
MAX_POSITIONS_PER_FRAME = 16

# bytes.translate tables that turn pass flags into 1 where a flag is set, else 0, for counting.
_HELD = bytes(1 if f & PASS_GIL_HELD else 0 for f in range(256))
_IN_GC = bytes(1 if f & PASS_IN_GC else 0 for f in range(256))
_HOLDER_CPU_WAIT = bytes(1 if f & PASS_HOLDER_CPU_WAIT else 0 for f in range(256))


class ThreadRuns:
    """One thread's runs, column-wise, in pass order: (passes, state, stack_id, syscall).

    The runs tile the thread's passes from ``start`` to ``end``; passes in which the thread was
    not seen are ABSENT runs. So no first-pass column is kept: 11 bytes a run.
    """

    __slots__ = ("start", "end", "passes", "state", "stack", "syscall")

    def __init__(self, start: int) -> None:
        self.start = self.end = start
        self.passes = array("I")
        self.state = array("B")
        self.stack = array("i")
        self.syscall = array("h")

    def columns(self) -> tuple:
        return (self.passes, self.state, self.stack, self.syscall)

    def __len__(self) -> int:
        return len(self.passes)

    @classmethod
    def bytes_per_run(cls) -> int:
        return sum(column.itemsize for column in cls(0).columns())

    def append_absent(self, passes: int) -> None:
        for column, value in zip(self.columns(), (passes, ABSENT, NO_STACK, NO_SYSCALL)):
            column.append(value)
        self.end += passes

    def runs(self):
        """(first_pass, passes, state, stack_id, syscall) of each run, ABSENT ones left out."""
        first = self.start
        for passes, state, stack_id, nr in zip(*self.columns()):
            if state != ABSENT:
                yield first, passes, state, stack_id, nr
            first += passes


_RUN_KEYS = {"start", *(name for name, _code in RUN_COLUMNS)}


def compact_runs(obj: dict) -> dict:
    """``json.load``'s object_hook for a saved recording: a thread's runs become arrays as soon as
    they are parsed, so a long recording never holds its runs as lists of ints (8 bytes a value
    and more, against 1-4) all at once. Values that do not fit are left as they are, for the
    checks on loading to name."""
    if obj.keys() == _RUN_KEYS:
        try:
            return {"start": obj["start"], **{name: array(code, obj[name]) for name, code in RUN_COLUMNS}}
        except (OverflowError, TypeError):
            return obj
    return obj


Frame = tuple  # (function: str, file: str, line: int)


@dataclass
class TargetInfo:
    """What we know about the sampled process, read once at attach time."""

    pid: int
    python_version: str
    executable: str
    switch_interval_s: float
    # Process tree context (``--subprocesses``); empty/None when not known.
    cmdline: str = ""
    ppid: Optional[int] = None

    @classmethod
    def from_native(cls, target: Any) -> "TargetInfo":
        return cls(
            pid=int(target.pid),
            python_version=str(target.python_version),
            executable=str(target.executable),
            switch_interval_s=float(target.switch_interval_s),
        )


class Session:
    """Samples of one recording, plus what is needed to interpret them."""

    def __init__(
        self,
        target: TargetInfo,
        rate_hz: float,
        start_time: Optional[float] = None,
        *,
        stacks: Optional[dict] = None,
        frames: Optional[dict] = None,
        thread_names: Optional[dict] = None,
        syscall_names: Optional[dict] = None,
        frame_positions: Optional[dict] = None,
    ) -> None:
        self.target = target
        self.rate_hz = float(rate_hz)
        self.start_time = time.time() if start_time is None else start_time  # wall clock, epoch s
        self.command: Optional[list] = None  # the `-- CMD` gilty started, if any
        self.requested_duration_s: Optional[float] = None
        self._duration_s: Optional[float] = None

        # One entry per kept pass (every timeline_step-th): seconds since the sampler was created.
        self.times = array("d")
        self.thread_runs: dict = {}  # tid -> ThreadRuns; first_pass indexes self.times
        self.passes = 0  # sampling passes, kept or not
        self.timeline_step = 1  # 1, or 2**k once the timeline was coarsened
        self.timeline_budget = budget_from_env()
        self.last_time: Optional[float] = None  # time of the last pass, kept or not
        self.flag_counts = [0, 0, 0]  # passes with PASS_GIL_HELD, PASS_IN_GC, PASS_HOLDER_CPU_WAIT set
        # Episodes, wake-ups, idle syscalls off every run (a rate of 0 is refused on loading, later).
        self.folds = RunFolds(1.0 / self.rate_hz if self.rate_hz else 0.0)
        self.counts: dict = {}  # (tid, state, stack_id) -> samples, keys in first-seen order
        # The same counts per stretch of time (stack_slots.py); None for a recording saved without them.
        self.stack_slots: Optional[StackSlots] = StackSlots()
        # (waiter tid, holder tid or None, holder stack_id) -> waiting_gil samples of the same pass
        self.blame: dict = {}
        self.pass_flags = bytearray()  # one byte per pass: PASS_GIL_HELD | PASS_IN_GC | PASS_HOLDER_CPU_WAIT
        # tid -> passes in which it held the GIL while waiting for a CPU (counted as cpu_wait, still a hold)
        self.held_cpu_wait: dict = {}
        # (tid, state, stack_id) -> samples of ``counts`` in which the thread was handling an exception
        self.handling: dict = {}

        self.stacks: dict = {} if stacks is None else stacks  # stack_id -> [frame_id, ...] innermost first
        self.frames: dict = {} if frames is None else frames  # frame_id -> (function, file, line)
        self.thread_names: dict = {} if thread_names is None else thread_names  # tid -> name
        self.syscall_names: dict = {} if syscall_names is None else syscall_names  # nr -> name
        # frame_id -> {(line, end_line, column, end_column): walks}: where in its line each frame's
        # instruction was (3.11+; columns None where the code has none). Apart from the frames, so
        # that stacks differing only in a column stay one stack.
        self.frame_positions: dict = {} if frame_positions is None else frame_positions

        self.errors = dict.fromkeys(ERROR_KEYS, 0)
        self.exited = False
        # Seconds since the recording's start at which the process was seen gone (``--subprocesses``).
        self.exited_at: Optional[float] = None
        self.stopped_by: Optional[str] = None  # "duration" | "interrupt" | "target_exit"
        self.partial = False
        self.partial_reason: Optional[str] = None
        # Raw summary of exact (uprobe) tracing from ``Sampler.exact_summary()``; None without --exact.
        self.exact: Optional[dict] = None
        # What the kernel's scheduler counted while sampling (docs/states.md, "Waiting for a CPU"):
        # seconds covered, per tid [CPU ns, run-queue delay ns], and the cgroup's
        # [periods, throttled periods, throttled ns] (None without a CPU controller).
        self.sched: dict = {"seconds": 0.0, "threads": {}, "cgroup": None}
        # The asyncio task view (``record --tasks``; gilty.sampling.tasks.TaskView), None when not asked.
        self.tasks: Optional[Any] = None
        # Source lines of the hot functions, read from the live target (recorded_sources.py):
        # {file: {"lines": {"N": text}, "not_shown": why the file is not shown, or ""}}.
        self.sources: dict = {}
        # ``record --free-threading`` (gilty.readiness): {"slowdown": float, "modules": the raw scan of
        # the target's extension modules or None, "modules_error": why not}; None when not asked.
        self.free_threading: Optional[dict] = None

    # -- building ---------------------------------------------------------------------------

    def add_batch(self, batch: Mapping[str, Any], syscall_name: Optional[Callable[[int], str]] = None) -> None:
        """Merge one ``Sampler.collect()`` result (or the same fields from ``gilty.sampling.aggregate``).

        ``syscall_name`` (normally ``_native.syscall_name``) names syscall numbers not seen
        before; names are kept in the session so the analysis never needs the native module.
        """
        offset = self.passes  # the batch's first pass
        times, flags = batch["times"], batch.get("pass_flags", b"")
        self.passes += len(times)
        if len(times):
            self.last_time = times[-1]
        for i, table in enumerate((_HELD, _IN_GC, _HOLDER_CPU_WAIT)):
            self.flag_counts[i] += flags.translate(table).count(1)
        step = self.timeline_step
        skip = (-offset) % step  # the batch's first kept pass
        self.times.extend(times[skip::step] if step > 1 else times)
        self.pass_flags += flags[skip::step] if step > 1 else flags
        for tid, n in batch.get("held_cpu_wait", ()):
            self.held_cpu_wait[tid] = self.held_cpu_wait.get(tid, 0) + n
        if batch.get("thread_slices"):
            self._merge_runs(batch, offset)
            if syscall_name is not None:
                for nr in set(array("h", batch["runs"]["syscall"])) - self.syscall_names.keys():
                    if nr >= 0:
                        self.syscall_names[nr] = syscall_name(nr)
        counts = self.counts
        for tid, state, stack_id, n in batch.get("counts", ()):
            key = (tid, state, stack_id)
            counts[key] = counts.get(key, 0) + n
        handling = self.handling
        for tid, state, stack_id, n in batch.get("handling", ()):
            key = (tid, state, stack_id)
            handling[key] = handling.get(key, 0) + n
        for frame_id, line, end_line, column, end_column, n in batch.get("positions", ()):
            self._add_position(frame_id, (line, end_line, column, end_column), n)
        if self.stack_slots is not None and batch["times"]:
            self.stack_slots.add(min(ticks_before(offset, step), len(self.times) - 1), batch.get("counts", ()))
        blame = self.blame
        for waiter, holder, stack_id, n in batch.get("blame", ()):
            key = (waiter, None if holder == NO_HOLDER else holder, stack_id)
            blame[key] = blame.get(key, 0) + n
        self.stacks.update(batch.get("stacks", {}))
        self.frames.update(batch.get("frames", {}))
        self.thread_names.update(batch.get("threads", {}))
        errors = batch.get("errors", {})
        for key in ("torn_retried", "torn_dropped", "torn_partial", "read_failed"):
            self.errors[key] += int(errors.get(key, 0))
        if "native_matched" in errors:
            for key in NATIVE_ERROR_KEYS:
                self.errors[key] = self.errors.get(key, 0) + int(errors.get(key, 0))
        if "gil_flag_checked" in errors:
            for key in GIL_FLAG_KEYS:
                self.errors[key] = self.errors.get(key, 0) + int(errors.get(key, 0))
        self.errors["late"] += int(batch.get("late", 0))
        sched = batch.get("sched")
        if sched:
            self._add_sched(sched)
        if batch.get("tasks") is not None:
            if self.tasks is None:
                from gilty.sampling.tasks import TaskView

                self.tasks = TaskView()
            self.tasks.add_batch(batch["tasks"])
        if batch.get("exited"):
            self.exited = True
        self._keep_within_budget()

    def _keep_within_budget(self) -> None:
        while len(self.times) > MIN_TICKS and max(len(self.times), self.run_count) > self.timeline_budget:
            self._coarsen()

    def _coarsen(self) -> None:
        """Halves the timeline's resolution: every other kept pass goes (``timeline.py``)."""
        self.timeline_step *= 2
        self.times = self.times[0::2]
        self.pass_flags = self.pass_flags[0::2]
        for runs in self.thread_runs.values():
            start, cols = decimate(runs.columns(), runs.start, 2)
            runs.start = runs.end = start
            runs.passes, runs.state, runs.stack, runs.syscall = cols
            runs.end += sum(runs.passes)
        if self.stack_slots is not None:
            self.stack_slots.coarsen(len(self.times))

    @property
    def timeline_note(self) -> Optional[str]:
        """What a timeline made from this session must say of its resolution, if coarsened."""
        return resolution_note(self.timeline_step, self.rate_hz) if self.timeline_step > 1 else None

    def _add_position(self, frame_id: int, position: tuple, n: int) -> None:
        seen = self.frame_positions.setdefault(frame_id, {})
        if position in seen or len(seen) < MAX_POSITIONS_PER_FRAME:
            seen[position] = seen.get(position, 0) + n

    def _add_sched(self, sched: Mapping[str, Any]) -> None:
        if "cpus" not in self.sched:  # read once, while the target runs: the saturation line names the limit
            from gilty.sampling.cpus import allowed_cpus

            self.sched["cpus"] = allowed_cpus(self.target.pid)
        self.sched["seconds"] += float(sched.get("seconds", 0.0))
        threads = self.sched["threads"]
        for tid, run_ns, delay_ns in sched.get("threads", ()):
            total = threads.setdefault(tid, [0, 0])
            total[0] += run_ns
            total[1] += delay_ns
        if sched.get("cgroup") is not None:
            old = self.sched["cgroup"] or [0, 0, 0]
            self.sched["cgroup"] = [a + b for a, b in zip(old, sched["cgroup"])]

    def _merge_runs(self, batch: Mapping[str, Any], offset: int) -> None:
        """Append a batch's runs to each thread's; a run starting at the batch's first pass that
        continues the thread's run reaching the previous pass (same state and syscall) extends it.

        Per thread, not per sample: each thread's slice of the batch is copied as whole columns.
        """
        cols = [array(code, batch["runs"][name]) for name, code in RUN_COLUMNS]
        self.folds.add_batch(offset, batch["times"], cols, batch["thread_slices"])
        step = self.timeline_step
        for tid, start, end, first in batch["thread_slices"]:
            first += offset
            passes, state, _stack, syscall = cols
            if step > 1:  # in ticks, the slice's runs cut to the kept passes
                first, thread_cols = decimate([c[start:end] for c in cols], first, step)
                passes, state, _stack, syscall = thread_cols
                start, end = 0, len(passes)
                if not end:
                    continue
            else:
                thread_cols = cols
            runs = self.thread_runs.get(tid)
            if runs is None:
                runs = self.thread_runs[tid] = ThreadRuns(first)
            elif not len(runs):  # every run it had fell between kept passes
                runs.start = runs.end = first
            elif first > runs.end:
                runs.append_absent(first - runs.end)
            elif runs.state[-1] == state[start] and runs.syscall[-1] == syscall[start]:
                runs.passes[-1] += passes[start]
                runs.end += passes[start]
                start += 1
            for column, values in zip(runs.columns(), thread_cols):
                column.extend(values[start:end])
            runs.end += sum(passes[start:end])

    def mark_partial(self, reason: str) -> None:
        self.partial = True
        self.partial_reason = reason

    def window(self) -> "Session":
        """An empty session for the next stretch of the same recording (``gilty top``).

        It shares the stack, frame, thread-name and syscall tables, because the sampler sends
        each stack and frame only in the batch where it is first seen.
        """
        win = Session(
            self.target,
            self.rate_hz,
            stacks=self.stacks,
            frames=self.frames,
            thread_names=self.thread_names,
            syscall_names=self.syscall_names,
            frame_positions=self.frame_positions,
        )
        win.command = self.command
        return win

    # -- reading ----------------------------------------------------------------------------

    @property
    def samples(self) -> int:
        """Number of sampling passes (kept in the timeline or not)."""
        return self.passes

    @property
    def run_count(self) -> int:
        return sum(len(runs) for runs in self.thread_runs.values())

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz

    @property
    def duration_s(self) -> float:
        """Wall time recorded, as measured by the recorder; else the span of the samples."""
        if self._duration_s is not None:
            return self._duration_s
        if not self.times:
            return 0.0
        return self.last_time - self.times[0] + self.period_s

    @duration_s.setter
    def duration_s(self, value: Optional[float]) -> None:
        self._duration_s = value

    def thread_name(self, tid: int) -> str:
        return self.thread_names.get(tid, f"tid {tid}")

    def syscall_label(self, nr: int) -> str:
        if nr < 0:
            return "unknown"
        return self.syscall_names.get(nr, f"syscall_{nr}")

    def frame_position(self, frame_id: int) -> Optional[tuple]:
        """(line, end_line, column, end_column) most seen for a frame (3.11+), or None."""
        seen = self.frame_positions.get(frame_id)
        if not seen:
            return None
        return max(seen, key=seen.__getitem__)

    def handling_samples(self, tid: int) -> int:
        """Samples in which the thread was handling an exception (inside ``except``, or a ``finally``
        run by one)."""
        return sum(n for (t, _state, _stack), n in self.handling.items() if t == tid)

    def innermost_frame(self, stack_id: int) -> Optional[Frame]:
        """(function, file, line) of the innermost frame of a stack, or None without one."""
        stack = self.stacks.get(stack_id)
        if not stack:
            return None
        return self.frames.get(stack[0])

    # -- the reading API every renderer uses (independent of how samples are stored) --------

    def tids(self) -> list:
        """Threads with at least one sample, in the order first seen."""
        return list(dict.fromkeys(tid for tid, _state, _stack in self.counts))

    def stack(self, stack_id: int) -> list:
        """[(function, file, line), ...] of a stack, innermost first; [] without a Python stack."""
        return [self.frames[f] for f in self.stacks.get(stack_id, ())]

    def stack_counts(self) -> dict:
        """{(tid, state, stack_id): samples} over the whole recording (stack_id NO_STACK included)."""
        return dict(self.counts)

    def runs(self) -> list:
        """Per thread, maximal stretches of consecutive passes in one state and syscall.

        [(tid, first_pass, passes, state, stack_id, syscall)], sorted by (tid, first_pass);
        ``stack_id`` is the stack seen in the stretch's first pass. Pass ``i`` covers
        ``pass_start(i)`` to ``pass_end(i)``.
        """
        return list(self.iter_runs())

    def iter_runs(self):
        """``runs()`` one at a time, without building the list (what the analyses use)."""
        for tid in sorted(self.thread_runs):
            for run in self.thread_runs[tid].runs():
                yield (tid, *run)

    def passes_with_gil_held(self) -> int:
        """Passes in which some thread held the GIL (running Python or collecting garbage)."""
        return self.flag_counts[0]

    def passes_holder_cpu_wait(self) -> int:
        """Passes in which the thread holding the GIL was waiting for a CPU."""
        return self.flag_counts[2]

    def passes_in_gc(self) -> int:
        """Passes in which some thread was collecting garbage."""
        return self.flag_counts[1]

    def pass_start(self, index: int) -> float:
        """Seconds since the start at which kept pass ``index`` was taken."""
        return self.times[index]

    def pass_end(self, index: int) -> float:
        """End of the time kept pass ``index`` stands for: the next kept pass, or one period after the last pass."""
        if index + 1 < len(self.times):
            return self.times[index + 1]
        return (self.last_time if self.last_time is not None else self.times[index]) + self.period_s

    # -- save / load ------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """A JSON-able form of everything recorded (not the analysed report)."""
        return {
            "session_format_version": SESSION_FORMAT_VERSION,
            "target": asdict(self.target),
            "rate_hz": self.rate_hz,
            "start_time": self.start_time,
            "duration_s": self._duration_s,
            "requested_duration_s": self.requested_duration_s,
            "command": self.command,
            "times": self.times.tolist(),
            "runs": {
                str(tid): {
                    "start": runs.start,
                    **{name: column.tolist() for (name, _code), column in zip(RUN_COLUMNS, runs.columns())},
                }
                for tid, runs in self.thread_runs.items()
            },
            "timeline": {
                "step": self.timeline_step,
                "passes": self.passes,
                "last_time": self.last_time,
                "flag_counts": list(self.flag_counts),
                "folds": self.folds.to_dict(),
            },
            "counts": [[*key, n] for key, n in self.counts.items()],
            "stack_slots": None if self.stack_slots is None else self.stack_slots.to_dict(),
            "blame": [[*key, n] for key, n in self.blame.items()],
            "pass_flags": list(self.pass_flags),
            "held_cpu_wait": [[tid, n] for tid, n in self.held_cpu_wait.items()],
            "handling": [[*key, n] for key, n in self.handling.items()],
            "frame_positions": {str(k): [[*p, n] for p, n in v.items()] for k, v in self.frame_positions.items()},
            # JSON object keys are strings; from_dict turns them back into ints.
            "stacks": {str(k): list(v) for k, v in self.stacks.items()},
            "frames": {str(k): list(v) for k, v in self.frames.items()},
            "thread_names": {str(k): v for k, v in self.thread_names.items()},
            "syscall_names": {str(k): v for k, v in self.syscall_names.items()},
            "errors": dict(self.errors),
            "exited": self.exited,
            "exited_at": self.exited_at,
            "stopped_by": self.stopped_by,
            "partial": self.partial,
            "partial_reason": self.partial_reason,
            "exact": self.exact,
            "sched": {**self.sched, "threads": {str(k): v for k, v in self.sched["threads"].items()}},
            **({"tasks": self.tasks.to_dict()} if self.tasks is not None else {}),
            **({"sources": self.sources} if self.sources else {}),
            **({"free_threading": self.free_threading} if self.free_threading is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Session":
        version = data.get("session_format_version")
        if version != SESSION_FORMAT_VERSION:
            raise ValueError(f"unsupported session format version {version!r}")
        session = cls(TargetInfo(**data["target"]), data["rate_hz"], data["start_time"])
        session.duration_s = data.get("duration_s")
        session.requested_duration_s = data.get("requested_duration_s")
        session.command = data.get("command")
        session.times = array("d", data["times"])
        for tid, columns in data["runs"].items():
            runs = session.thread_runs[int(tid)] = ThreadRuns(columns["start"])
            for (name, code), column in zip(RUN_COLUMNS, runs.columns()):
                values = columns[name]
                if isinstance(values, array) and values.typecode == code:
                    setattr(runs, name, values)  # parsed into an array already (compact_runs): kept, not copied
                else:
                    column.extend(values)
            runs.end += sum(runs.passes)
        session.counts = {(tid, state, stack_id): n for tid, state, stack_id, n in data["counts"]}
        session.blame = {(waiter, holder, stack_id): n for waiter, holder, stack_id, n in data["blame"]}
        session.pass_flags = bytearray(data["pass_flags"])
        _load_timeline(session, data.get("timeline"))
        session.held_cpu_wait = {tid: n for tid, n in data.get("held_cpu_wait", ())}
        # Both absent from recordings made before they were kept.
        try:
            session.handling = {(tid, state, stack_id): n for tid, state, stack_id, n in data.get("handling", ())}
            session.frame_positions = {
                int(k): {tuple(p[:4]): p[4] for p in v} for k, v in data.get("frame_positions", {}).items()
            }
        except (AttributeError, IndexError, TypeError, ValueError):
            raise ValueError("handling or frame_positions is not as a recorder writes it") from None
        session.stacks = {int(k): list(v) for k, v in data["stacks"].items()}
        slots = data.get("stack_slots")
        session.stack_slots = (
            None if slots is None else StackSlots.from_dict(slots, len(session.times), session.stacks, NO_STACK, len(STATE_NAMES))
        )
        session.frames = {int(k): tuple(v) for k, v in data["frames"].items()}
        session.thread_names = {int(k): v for k, v in data["thread_names"].items()}
        session.syscall_names = {int(k): v for k, v in data["syscall_names"].items()}
        session.errors.update(data.get("errors", {}))
        session.exited = bool(data.get("exited"))
        session.exited_at = data.get("exited_at")
        session.stopped_by = data.get("stopped_by")
        session.partial = bool(data.get("partial"))
        session.partial_reason = data.get("partial_reason")
        session.exact = data.get("exact")
        sched = data.get("sched")
        if sched:
            try:
                threads = {int(k): [int(v[0]), int(v[1])] for k, v in sched.get("threads", {}).items()}
                cgroup = sched.get("cgroup")
                session.sched = {
                    "seconds": float(sched.get("seconds", 0.0)),
                    "threads": threads,
                    "cgroup": None if cgroup is None else [int(x) for x in cgroup[:3]],
                }
                cpus = sched.get("cpus")
                if isinstance(cpus, dict):
                    session.sched["cpus"] = {
                        "allowed": int(cpus["allowed"]),
                        "host": int(cpus["host"]),
                        "by": str(cpus.get("by", "affinity")),
                    }
            except (AttributeError, IndexError, TypeError, ValueError):
                raise ValueError("sched is not {seconds, threads: {tid: [cpu ns, delay ns]}, cgroup}") from None
        if data.get("tasks") is not None:
            from gilty.sampling.tasks import TaskView

            session.tasks = TaskView.from_dict(data["tasks"])
            if any(s != NO_STACK and s not in session.stacks for _p, s, _st, _a in session.tasks.counts):
                raise ValueError("the task view's samples name a stack that is not in the recording")
        session.sources = _load_sources(data.get("sources"))
        session.free_threading = _free_threading(data.get("free_threading"))
        check_loaded(session)
        return session

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f)

    @classmethod
    def load(cls, path: str) -> "Session":
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


def _free_threading(data: Any) -> Optional[dict]:
    """A saved ``free_threading`` entry as a recorder writes it, or a ValueError."""
    if data is None:
        return None
    try:
        slowdown = float(data["slowdown"])
        modules = data.get("modules")
        if modules is not None:
            modules = {
                "modules": [
                    {
                        "name": str(m["name"]),
                        "def_name": m.get("def_name"),
                        "init": str(m["init"]),
                        "gil": str(m["gil"]),
                        "unknown_why": m.get("unknown_why"),
                        "path": m.get("path"),
                        "builtin": bool(m.get("builtin")),
                        "package": str(m.get("package") or ""),
                        "dist": m.get("dist"),
                    }
                    for m in modules["modules"]
                ],
                "unreadable": int(modules.get("unreadable", 0)),
                "first_error": modules.get("first_error"),
            }
    except (AttributeError, KeyError, TypeError, ValueError):
        raise ValueError("free_threading is not {slowdown, modules: {modules: [...]}}") from None
    _finite(slowdown, "free_threading.slowdown", 0.0, 100.0)
    error = data.get("modules_error")
    return {"slowdown": slowdown, "modules": modules, "modules_error": None if error is None else str(error)}


def _finite(value, what: str, low: float = 0.0, high: float = math.inf, low_included: bool = True) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (value >= low if low_included else value > low) or value > high:
        raise ValueError(f"{what} is {value!r}")


def _whole(value, what: str, low: int = 0, high: int = 2**63) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{what} is {value!r}")


def _load_timeline(session: Session, timeline: Optional[Mapping[str, Any]]) -> None:
    """The timeline's step and what was counted apart from it; for a recording saved before the
    timeline was kept within a budget (all passes, every run), counted again from the runs."""
    if timeline is None:
        session.passes = len(session.times)
        session.last_time = session.times[-1] if session.times else None
        session.flag_counts = [session.pass_flags.translate(t).count(1) for t in (_HELD, _IN_GC, _HOLDER_CPU_WAIT)]
        folds = session.folds = RunFolds(session.folds.period_s)
        try:
            for tid, runs in session.thread_runs.items():
                folds.add_batch(0, session.times, runs.columns(), [(tid, 0, len(runs), runs.start)])
        except (IndexError, TypeError, ValueError):
            raise ValueError("runs do not fit the recording's passes") from None
        return
    try:
        session.timeline_step = int(timeline["step"])
        session.passes = int(timeline["passes"])
        session.last_time = None if timeline["last_time"] is None else float(timeline["last_time"])
        session.flag_counts = [int(n) for n in timeline["flag_counts"][:3]]
    except (KeyError, TypeError, ValueError):
        raise ValueError("timeline is not {step, passes, last_time, flag_counts, folds}") from None
    step = session.timeline_step
    if step < 1 or step & (step - 1) or len(session.flag_counts) != 3:
        raise ValueError(f"timeline step is {step!r}")
    if not ticks_before(session.passes, step) == len(session.times):
        raise ValueError(f"{len(session.times)} times for {session.passes} passes kept every {step}")
    if any(not 0 <= n <= session.passes for n in session.flag_counts):
        raise ValueError("timeline.flag_counts do not fit the passes")
    session.folds = RunFolds.from_dict(timeline.get("folds"), session.folds.period_s)


def _load_sources(sources) -> dict:
    """A saved recording's source lines, checked to be text only (absent from older recordings)."""
    if sources is None:
        return {}
    shape = "sources is not {file: {lines: {line number: text}, not_shown: text}}"
    if not isinstance(sources, dict):
        raise ValueError(shape)
    out = {}
    for name, entry in sources.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("lines", {}), dict):
            raise ValueError(shape)
        lines = entry.get("lines", {})
        if not all(isinstance(k, str) and k.isascii() and k.isdigit() and isinstance(v, str) for k, v in lines.items()):
            raise ValueError(shape)
        out[name] = {"lines": dict(lines), "not_shown": str(entry.get("not_shown") or "")}
    return out


def check_loaded(session: Session) -> None:
    """Refuse a loaded session that no recorder could have written (a damaged or hand-edited file),
    before any analysis divides by its rate or indexes with its states: ValueError, one line."""
    _finite(session.rate_hz, "rate_hz", 0.0, 1e6, low_included=False)
    _finite(session.start_time, "start_time", -math.inf)
    if session._duration_s is not None:
        _finite(session._duration_s, "duration_s")
    passes = len(session.times)
    if passes and not (all(map(math.isfinite, session.times)) and all(a <= b for a, b in zip(session.times, session.times[1:]))):
        raise ValueError("times are not finite and increasing")
    if len(session.pass_flags) > passes:
        raise ValueError(f"{len(session.pass_flags)} pass flags for {passes} passes")
    for tid, runs in session.thread_runs.items():
        _whole(runs.start, f"thread {tid}'s first pass", 0, passes)
        if runs.end > passes or len({len(c) for c in runs.columns()}) != 1:
            raise ValueError(f"thread {tid}'s runs do not fit the {passes} passes")
        if 0 in runs.passes:
            raise ValueError(f"thread {tid} has a run of no passes")
        if any(s >= len(STATE_NAMES) and s != ABSENT for s in runs.state):
            raise ValueError(f"thread {tid} has an unknown state")
        if any(s not in session.stacks and s != NO_STACK for s in set(runs.stack)):
            raise ValueError(f"thread {tid}'s runs name a stack that is not in the recording")
    for frame_id, frame in session.frames.items():
        if len(frame) != 3 or not isinstance(frame[0], str) or not isinstance(frame[1], str):
            raise ValueError(f"frame {frame_id} is not (function, file, line)")
        # A C frame of `record --native` has a line of -2 or less (`native_frames`).
        _whole(frame[2], f"frame {frame_id}'s line", -(2**31))
    for stack_id, stack in session.stacks.items():
        if any(f not in session.frames for f in stack):
            raise ValueError(f"stack {stack_id} names a frame that is not in the recording")
    passes = session.passes  # kept in the timeline or not
    if session.times and (
        session.last_time is None or not math.isfinite(session.last_time) or session.last_time < session.times[-1]
    ):
        raise ValueError("timeline.last_time is before the last time kept")
    for (tid, state, stack_id), n in session.counts.items():
        _whole(tid, "a thread id", 0)
        _whole(state, f"a state of thread {tid}", 0, len(STATE_NAMES) - 1)
        _whole(n, f"a sample count of thread {tid}", 0, passes)
        if stack_id != NO_STACK and stack_id not in session.stacks:
            raise ValueError(f"thread {tid}'s samples name a stack that is not in the recording")
    for (tid, state, stack_id), n in session.handling.items():
        _whole(n, f"a handling count of thread {tid}", 0, passes)
        if n > session.counts.get((tid, state, stack_id), 0):
            raise ValueError(f"thread {tid} handled exceptions in more samples than it has")
    for frame_id, seen in session.frame_positions.items():
        if frame_id not in session.frames:
            raise ValueError(f"a position names frame {frame_id}, which is not in the recording")
        for position, n in seen.items():
            _whole(position[0], f"frame {frame_id}'s position line", -1)
            if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in position[1:]):
                raise ValueError(f"frame {frame_id}'s position is {list(position)!r}")
            _whole(n, f"a position count of frame {frame_id}", 0)
    for (waiter, holder, stack_id), n in session.blame.items():
        _whole(waiter, "a waiting thread id", 0)
        if holder is not None:
            _whole(holder, "a holding thread id", 0)
        _whole(n, f"a blame count of thread {waiter}", 0, passes)
        if stack_id != NO_STACK and stack_id not in session.stacks:
            raise ValueError(f"thread {waiter}'s blame names a stack that is not in the recording")
    if not all(isinstance(v, str) for v in session.thread_names.values()):
        raise ValueError("a thread name is not text")
    if not all(isinstance(v, str) for v in session.syscall_names.values()):
        raise ValueError("a syscall name is not text")
    for key, n in session.errors.items():
        _whole(n, f"errors.{key}", 0)
    if session.exact is not None and not isinstance(session.exact, dict):
        raise ValueError("exact is not an object")


RECORDING_FORMAT_VERSION = 1


class Recording:
    """One recording: every process sampled on one schedule, one ``Session`` each.

    Renderers take a Recording; a single-process recording is a Recording of one Session
    (``Recording.of(session)``). Process-level facts (a process exiting, its partial flag)
    live on its Session; what ended the whole recording lives here.
    """

    def __init__(self, sessions: Optional[list] = None, rate_hz: float = 100.0, start_time: Optional[float] = None):
        self.sessions: list = [] if sessions is None else list(sessions)
        self.rate_hz = float(rate_hz)
        self.start_time = time.time() if start_time is None else start_time
        self.command: Optional[list] = None
        self.requested_duration_s: Optional[float] = None
        self.duration_s: Optional[float] = None
        self.stopped_by: Optional[str] = None
        self.subprocesses = False  # descendants were followed (``--subprocesses``)
        self.partial = False
        self.partial_reason: Optional[str] = None
        # Descendants not sampled: [{"pid", "ppid", "t", "reason"}] (zombies, not Python, ...).
        self.skipped: list = []
        # One-line hints about the recording itself (e.g. "busy children: use --subprocesses").
        self.notes: list = []
        # Results of --fail-if gates (gilty.sampling.analysis.gates.as_json) and the exit status of a `-- CMD`
        # that ended by itself; None when not asked / not launched.
        self.gates: Optional[list] = None
        self.command_status: Optional[int] = None
        # {pid: what it is} for the helpers among a master's children (a router, a resource tracker), which
        # serve no request and are kept out of worker figures (gilty.sampling.helpers).
        self.helpers: dict = {}

    @classmethod
    def of(cls, session: Session) -> "Recording":
        """The Recording of one process, taking its metadata from the session."""
        rec = cls([session], session.rate_hz, session.start_time)
        rec.command = session.command
        rec.requested_duration_s = session.requested_duration_s
        rec.duration_s = session.duration_s
        rec.stopped_by = session.stopped_by
        rec.partial = session.partial
        rec.partial_reason = session.partial_reason
        return rec

    def session(self, pid: int) -> Optional[Session]:
        return next((s for s in self.sessions if s.target.pid == pid), None)

    @property
    def pids(self) -> list:
        return [s.target.pid for s in self.sessions]

    def mark_partial(self, reason: str) -> None:
        self.partial = True
        self.partial_reason = reason

    def to_dict(self) -> dict:
        return {
            "recording_format_version": RECORDING_FORMAT_VERSION,
            "rate_hz": self.rate_hz,
            "start_time": self.start_time,
            "command": self.command,
            "requested_duration_s": self.requested_duration_s,
            "duration_s": self.duration_s,
            "stopped_by": self.stopped_by,
            "subprocesses": self.subprocesses,
            "partial": self.partial,
            "partial_reason": self.partial_reason,
            "skipped": self.skipped,
            "notes": self.notes,
            "gates": self.gates,
            "command_status": self.command_status,
            "processes": [s.to_dict() for s in self.sessions],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Recording":
        version = data.get("recording_format_version")
        if version != RECORDING_FORMAT_VERSION:
            raise ValueError(f"unsupported recording format version {version!r}")
        rec = cls([Session.from_dict(p) for p in data["processes"]], data["rate_hz"], data["start_time"])
        rec.command = data.get("command")
        rec.requested_duration_s = data.get("requested_duration_s")
        rec.duration_s = data.get("duration_s")
        rec.stopped_by = data.get("stopped_by")
        rec.subprocesses = bool(data.get("subprocesses"))
        rec.partial = bool(data.get("partial"))
        rec.partial_reason = data.get("partial_reason")
        rec.skipped = list(data.get("skipped", []))
        rec.notes = list(data.get("notes", []))
        rec.gates = data.get("gates")
        rec.command_status = data.get("command_status")
        _finite(rec.rate_hz, "rate_hz", 0.0, 1e6, low_included=False)
        _finite(rec.start_time, "start_time", -math.inf)
        if rec.duration_s is not None:
            _finite(rec.duration_s, "duration_s")
        return rec

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f)

    @classmethod
    def load(cls, path: str) -> "Recording":
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))
