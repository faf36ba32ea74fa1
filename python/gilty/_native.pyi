# Type stub for the PyO3 extension gilty._native (crates/gilty-python).
# Keep in step with the Rust side; docs/states.md explains the state codes.

from typing import Literal, TypedDict

Frame = tuple[str, str, int]  # (function, file, line)

class _DumpThread(TypedDict):
    tid: int
    name: str
    state: int  # 0 holding_gil, 1 gc, 2 waiting_gil, 3 native, 4 idle, 5 unknown
    syscall: int  # syscall number the thread is blocked in, or -1
    stack: list[Frame]  # innermost first

class _Dump(TypedDict):
    t: float
    threads: list[_DumpThread]

class _Errors(TypedDict):
    torn_retried: int
    torn_dropped: int
    read_failed: int

class Batch(TypedDict):
    times: list[float]  # seconds since the Sampler was created, one per sampling pass
    rows: list[tuple[int, int, int, int, int]]  # (sample_idx, tid, state, stack_id, syscall)
    stacks: dict[int, list[int]]  # stack_id -> frame ids, innermost first; only new stacks
    frames: dict[int, Frame]  # frame_id -> frame; only new frames
    threads: dict[int, str]  # tid -> current name
    errors: _Errors
    exited: bool
    late: int

ErrorKind = Literal[
    "no_such_process",
    "not_python",
    "unsupported_version",
    "unrecognised_interpreter",
    "permission_denied",
    "target_exited",
    "internal",
]

class GiltyError(Exception):
    kind: ErrorKind

class Target:
    pid: int
    python_version: str
    executable: str
    switch_interval_s: float  # read live; unavailable once a Sampler has taken over the Target
    binary: str  # the file holding the interpreter: libpython*.so or the executable itself
    used_debug_offsets: bool  # 3.13+: layout taken from the interpreter's _Py_DebugOffsets
    debug_offset_mismatches: list[str]
    def __init__(self, pid: int) -> None: ...
    def dump(self) -> _Dump: ...

class Sampler:
    def __init__(self, target: Target, rate_hz: float) -> None: ...
    def collect(self, seconds: float) -> Batch: ...

def syscall_name(nr: int) -> str: ...
