"""The recorded data model: target metadata plus every sample, merged from the sampler's batches.

Rows are stored column-wise in plain lists (one list per field) rather than one object per
row: a minute at 1000 Hz with 10 threads is 600k rows, and the analysis folds these columns
with ``zip``/``Counter`` at C speed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from operator import itemgetter
from typing import Any, Callable, Iterable, Mapping, Optional

# Thread states as the native sampler encodes them (see docs/states.md).
HOLDING_GIL = 0
GC = 1
WAITING_GIL = 2
NATIVE = 3
IDLE = 4
UNKNOWN = 5
STATE_NAMES = ("holding_gil", "gc", "waiting_gil", "native", "idle", "unknown")

NO_STACK = -1  # stack_id of a row without a Python stack
NO_SYSCALL = -1  # syscall of a row that is running or where it does not apply

ERROR_KEYS = ("torn_retried", "torn_dropped", "read_failed", "late")

SESSION_FORMAT_VERSION = 1

Frame = tuple  # (function: str, file: str, line: int)


@dataclass
class TargetInfo:
    """What we know about the sampled process, read once at attach time."""

    pid: int
    python_version: str
    executable: str
    switch_interval_s: float

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
    ) -> None:
        self.target = target
        self.rate_hz = float(rate_hz)
        self.start_time = time.time() if start_time is None else start_time  # wall clock, epoch s
        self.command: Optional[list] = None  # the `-- CMD` gilty started, if any
        self.requested_duration_s: Optional[float] = None
        self._duration_s: Optional[float] = None

        # One entry per sampling pass: seconds since the sampler was created.
        self.times: list = []
        # One entry per (pass, thread) row, column-wise; row_sample indexes self.times.
        self.row_sample: list = []
        self.row_tid: list = []
        self.row_state: list = []
        self.row_stack: list = []
        self.row_syscall: list = []

        self.stacks: dict = {} if stacks is None else stacks  # stack_id -> [frame_id, ...] innermost first
        self.frames: dict = {} if frames is None else frames  # frame_id -> (function, file, line)
        self.thread_names: dict = {} if thread_names is None else thread_names  # tid -> name
        self.syscall_names: dict = {} if syscall_names is None else syscall_names  # nr -> name

        self.errors = dict.fromkeys(ERROR_KEYS, 0)
        self.exited = False
        self.stopped_by: Optional[str] = None  # "duration" | "interrupt" | "target_exit"
        self.partial = False
        self.partial_reason: Optional[str] = None
        # Raw summary of exact (uprobe) tracing from ``Sampler.exact_summary()``; None without --exact.
        self.exact: Optional[dict] = None

    # -- building ---------------------------------------------------------------------------

    def add_batch(self, batch: Mapping[str, Any], syscall_name: Optional[Callable[[int], str]] = None) -> None:
        """Append one ``Sampler.collect()`` result.

        ``syscall_name`` (normally ``_native.syscall_name``) names syscall numbers not seen
        before; names are kept in the session so the analysis never needs the native module.
        """
        offset = len(self.times)
        self.times.extend(batch["times"])
        rows = batch["rows"]
        if rows:
            # Timsort is linear on already-ordered input; the convoy scan relies on sample order.
            rows = sorted(rows, key=itemgetter(0))
            samples, tids, states, stack_ids, syscalls = zip(*rows)
            if offset:
                self.row_sample.extend([s + offset for s in samples])
            else:
                self.row_sample.extend(samples)
            self.row_tid.extend(tids)
            self.row_state.extend(states)
            self.row_stack.extend(stack_ids)
            self.row_syscall.extend(syscalls)
            if syscall_name is not None:
                for nr in set(syscalls) - self.syscall_names.keys():
                    if nr >= 0:
                        self.syscall_names[nr] = syscall_name(nr)
        self.stacks.update(batch.get("stacks", {}))
        self.frames.update(batch.get("frames", {}))
        self.thread_names.update(batch.get("threads", {}))
        errors = batch.get("errors", {})
        for key in ("torn_retried", "torn_dropped", "read_failed"):
            self.errors[key] += int(errors.get(key, 0))
        self.errors["late"] += int(batch.get("late", 0))
        if batch.get("exited"):
            self.exited = True

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
        )
        win.command = self.command
        return win

    # -- reading ----------------------------------------------------------------------------

    @property
    def samples(self) -> int:
        """Number of sampling passes."""
        return len(self.times)

    @property
    def row_count(self) -> int:
        return len(self.row_tid)

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
        return self.times[-1] - self.times[0] + self.period_s

    @duration_s.setter
    def duration_s(self, value: Optional[float]) -> None:
        self._duration_s = value

    def thread_name(self, tid: int) -> str:
        return self.thread_names.get(tid, f"tid {tid}")

    def syscall_label(self, nr: int) -> str:
        if nr < 0:
            return "unknown"
        return self.syscall_names.get(nr, f"syscall_{nr}")

    def innermost_frame(self, stack_id: int) -> Optional[Frame]:
        """(function, file, line) of the innermost frame of a stack, or None without one."""
        stack = self.stacks.get(stack_id)
        if not stack:
            return None
        return self.frames.get(stack[0])

    def rows(self) -> Iterable[tuple]:
        """Rows as (sample, tid, state, stack_id, syscall) tuples, for tests and small tools."""
        return zip(self.row_sample, self.row_tid, self.row_state, self.row_stack, self.row_syscall)

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
            "times": self.times,
            "rows": {
                "sample": self.row_sample,
                "tid": self.row_tid,
                "state": self.row_state,
                "stack": self.row_stack,
                "syscall": self.row_syscall,
            },
            # JSON object keys are strings; from_dict turns them back into ints.
            "stacks": {str(k): list(v) for k, v in self.stacks.items()},
            "frames": {str(k): list(v) for k, v in self.frames.items()},
            "thread_names": {str(k): v for k, v in self.thread_names.items()},
            "syscall_names": {str(k): v for k, v in self.syscall_names.items()},
            "errors": dict(self.errors),
            "exited": self.exited,
            "stopped_by": self.stopped_by,
            "partial": self.partial,
            "partial_reason": self.partial_reason,
            "exact": self.exact,
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
        session.times = list(data["times"])
        rows = data["rows"]
        session.row_sample = list(rows["sample"])
        session.row_tid = list(rows["tid"])
        session.row_state = list(rows["state"])
        session.row_stack = list(rows["stack"])
        session.row_syscall = list(rows["syscall"])
        session.stacks = {int(k): list(v) for k, v in data["stacks"].items()}
        session.frames = {int(k): tuple(v) for k, v in data["frames"].items()}
        session.thread_names = {int(k): v for k, v in data["thread_names"].items()}
        session.syscall_names = {int(k): v for k, v in data["syscall_names"].items()}
        session.errors.update(data.get("errors", {}))
        session.exited = bool(data.get("exited"))
        session.stopped_by = data.get("stopped_by")
        session.partial = bool(data.get("partial"))
        session.partial_reason = data.get("partial_reason")
        session.exact = data.get("exact")
        return session

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f)

    @classmethod
    def load(cls, path: str) -> "Session":
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))
