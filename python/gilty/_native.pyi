# Type stub for the PyO3 extension gilty._native (crates/gilty-python).
# Keep in step with the Rust side; docs/states.md explains the state codes.

from typing import Literal, Optional, TypedDict

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

class _Runs(TypedDict):
    # Column-wise, by (tid, first pass); read with array.array(typecode).frombytes.
    passes: bytes  # "I"
    state: bytes  # "B"; 255 = the thread was not seen in those passes
    stack: bytes  # "i"; stack_id of the run's first pass, -1 = no Python stack
    syscall: bytes  # "h"; -1 = running or not applicable

class Batch(TypedDict):
    times: list[float]  # seconds since the Sampler was created, one per sampling pass
    runs: _Runs  # each thread's runs of one (state, syscall); all closed at the batch end
    thread_slices: list[tuple[int, int, int, int]]  # (tid, start, end, first pass) of a thread's runs
    counts: list[tuple[int, int, int, int]]  # (tid, state, stack_id, samples), first seen first
    blame: list[tuple[int, int, int, int]]  # (waiter tid, holder tid or -1, holder stack_id, samples)
    pass_flags: bytes  # one per pass: 1 = some thread held the GIL, 2 = some thread was in GC
    stacks: dict[int, list[int]]  # stack_id -> frame ids, innermost first; only new stacks
    frames: dict[int, Frame]  # frame_id -> frame; only new frames
    threads: dict[int, str]  # tid -> current name
    errors: _Errors
    exited: bool
    late: int

ErrorKind = Literal[
    "no_such_process",
    "not_python",
    "not_initialised",
    "unsupported_version",
    "unrecognised_interpreter",
    "permission_denied",
    "target_exited",
    "internal",
]

class GiltyError(Exception):
    kind: ErrorKind

class _ExtensionModule(TypedDict):
    name: str  # its key in sys.modules
    def_name: str | None  # m_name of its PyModuleDef
    init: Literal["multi-phase", "single-phase", "export"]
    gil: Literal["not_used", "used", "undeclared", "unknown"]  # its Py_mod_gil slot (3.13+)
    unknown_why: str | None
    path: str | None  # the file whose mapping holds its definition (else its __file__)
    builtin: bool  # defined in the executable or libpython

class _ModuleScan(TypedDict):
    modules: list[_ExtensionModule]  # sorted by name
    unreadable: int  # module objects that did not read (a torn read): the scan is partial
    first_error: str | None

class Target:
    pid: int
    python_version: str
    executable: str
    switch_interval_s: float  # read live; unavailable once a Sampler has taken over the Target
    binary: str  # the file holding the interpreter: libpython*.so or the executable itself
    used_debug_offsets: bool  # 3.13+: layout taken from the interpreter's _Py_DebugOffsets
    debug_offset_mismatches: list[str]
    def __init__(self, pid: int) -> None: ...
    def dump(self, locals: bool = ..., positions: bool = ..., native: bool = ...) -> _Dump: ...
    def extension_modules(self) -> _ModuleScan: ...

class Sampler:
    def __init__(self, target: Target, rate_hz: float, exact: bool = ..., tasks: bool = ..., native: bool = ...) -> None: ...
    def collect(self, seconds: float) -> Batch: ...

def syscall_name(nr: int) -> str: ...

# -- several processes on one schedule (crates/gilty-python/src/process_set.rs) --------------------

class _Attached(TypedDict):
    kind: Literal["attached"]
    pid: int
    ppid: int
    t: float  # seconds since the ProcessSet was created
    cmdline: str
    python_version: str
    executable: str
    switch_interval_s: float

class _Exited(TypedDict):
    kind: Literal["exited"]
    pid: int
    t: float

class _Skipped(TypedDict):
    kind: Literal["skipped"]  # zombie, not Python, unsupported Python, no permission; once per pid
    pid: int
    ppid: int
    t: float
    reason: str

class ProcessBatch(TypedDict):
    batches: dict[int, Batch]  # per pid; an exited process's last batch has exited=True
    events: list[_Attached | _Exited | _Skipped]
    finished: bool  # nothing left to sample

class ProcessSet:
    pids: list[int]  # sampled now
    def __init__(self, pids: list[int], rate_hz: float, follow: bool = False) -> None: ...
    def elapsed(self) -> float: ...
    def collect(self, seconds: float) -> ProcessBatch: ...  # returns within ~0.1 s of `seconds`

# -- gilty memory (crates/gilty-python/src/memory.rs; docs/memory.md) -----------------------------

class _GcState(TypedDict):
    enabled: bool
    collecting: bool
    thresholds: list[int]  # 3
    counts: list[int]  # 3
    collections: list[int] | None  # collections per generation since start-up
    frozen_empty: bool
    long_lived_total: int | None  # objects that survived the last full collection
    long_lived_pending: int | None

class _MemBaseline(TypedDict):
    t: float
    present_bytes: int
    shared_bytes: int  # present and not exclusively mapped: the pages watched for copies
    mappings: int
    scan_s: float
    method: Literal["pagemap_exclusive_bit", "pagemap_exclusive_bit_and_pfn"]

class _MemProcess(TypedDict):
    pid: int
    ppid: int
    role: Literal["master", "worker"]
    cmdline: str
    first_seen: float
    exited: float | None
    python: str | None
    gc_note: str | None
    baseline: _MemBaseline | None

class _MemCost(TypedDict):
    stat_s: float
    smaps_s: float
    gc_s: float
    pagemap_s: float
    pages_read: int

class _MemSample(TypedDict):
    pid: int
    # pass number (0: measured when found); t in seconds since the monitor started
    t: float
    rss: int
    pss: int
    uss: int
    shared_clean: int
    shared_dirty: int
    private_clean: int
    private_dirty: int
    anonymous: int
    swap: int
    minflt: int
    majflt: int
    gc: _GcState | None
    cost: _MemCost

class _CowStep(TypedDict):
    pid: int
    t: float
    reason: Literal["pass", "gc_start", "gc_end", "final"]
    gc_bytes: int
    outside_bytes: int
    ambiguous_bytes: int
    released_bytes: int
    sole_bytes: int
    minflt: int
    scan_s: float
    pages_read: int

class _GcWindow(TypedDict):
    pid: int
    start: float
    end: float
    generation: int | None
    polls: int

class _GcSnapshot(_GcState):
    pid: int
    t: float
    reason: Literal["initial", "changed"]
    frozen_objects: int
    frozen_exact: bool
    frozen_walk_s: float

class _ForkShare(TypedDict):
    present_bytes: int
    shared_with_parent_bytes: int
    copied_bytes: int
    new_bytes: int
    shared_other_bytes: int
    method: Literal["pagemap_pfn", "pagemap_exclusive_bit"]
    scan_s: float

class _ForkFacts(TypedDict):
    pid: int
    t: float
    when: Literal["found", "final"]
    parent: int
    share: _ForkShare | None  # workers against their parent since fork
    modules: list[str] | None  # sys.modules names

class MemoryBatch(TypedDict):
    processes: list[_MemProcess]  # new processes, and updates (exited)
    samples: list[_MemSample]  # each also has "pass": int
    cow_steps: list[_CowStep]
    gc_windows: list[_GcWindow]
    gc_snapshots: list[_GcSnapshot]
    fork_facts: list[_ForkFacts]
    notes: list[str]
    master_exited: float | None
    finished: bool

class _PollStats(TypedDict):
    period_s: float
    passes: int
    reads: int
    read_errors: int
    late_passes: int
    max_gap_s: float
    elapsed_s: float
    cpu_s: float
    windows: int

class MemoryStats(TypedDict):
    elapsed_s: float
    passes: int
    trigger_scans: int
    trigger_scans_skipped: int
    tree_scans: int
    tree_scan_s: float
    measuring_cpu_s: float
    gc_poll: _PollStats

class MemoryMonitor:
    pid: int
    finished: bool
    def __init__(self, pid: int, interval_s: float = 1.0, gc_poll_s: float = 0.001, pagemap: bool = True) -> None: ...
    def collect(self, seconds: float) -> MemoryBatch: ...
    def stop(self) -> MemoryStats: ...

class GcConfig(_GcState):
    frozen_objects: int
    frozen_exact: bool
    frozen_walk_s: float

def gc_config(pid: int, max_frozen: int = 5_000_000, budget_s: float = 0.1) -> GcConfig: ...

class PassCost(TypedDict):
    rss: int
    stat_s: float
    smaps_s: float
    maps_s: float
    gc_s: float
    pagemap_baseline_s: float
    pagemap_scan_s: float
    pages_read: int
    shared_pages: int

def measure_once(pid: int) -> PassCost: ...

class FaultRow(TypedDict):
    pid: int
    frames: list[tuple[str, str, int]]  # innermost first; [] without a Python stack
    gc: bool
    c_function: Optional[str]
    samples: int

class FaultReport(TypedDict):
    period: int
    page_size: int
    method: str  # "pfn" | "exclusive"
    samples: int
    copied: int
    other: int
    no_stack: int
    lost: int
    lag_p50_s: float
    lag_p99_s: float
    lag_max_s: float
    late: int
    elapsed_s: float
    cpu_s: float
    stack_reads: int
    stack_failures: int
    workers: list[int]
    errors: list[tuple[int, str]]
    rows: list[FaultRow]

class FaultWatch:
    """`gilty memory --faults`: the workers' minor page faults that copied a page shared with the
    master, joined with their Python stacks (crates/gilty-core/src/memory/faults.rs)."""

    def __init__(self, pid: int, period: int = 1) -> None: ...
    def stop(self) -> Optional[FaultReport]: ...

class LoadStop:
    """A flag that ends a running `load_run` early (set it from another thread)."""
    def __init__(self) -> None: ...
    def set(self) -> None: ...
    @property
    def is_set(self) -> bool: ...

def load_run(plan: dict, stop: LoadStop | None = None) -> dict:
    """One open-loop load run (gilty-load); see docs/load.md for the plan and the result."""
    ...
def flamegraph_svg(lines: list[str], title: str, subtitle: str | None = None, count_name: str = "samples") -> str:
    """An SVG flame graph drawn by inferno from collapsed lines (``frame;frame;... count``, outermost first)."""

def specialization_read_code(pid: int, address: int) -> dict:
    """The code object at ``address`` in ``pid``, decoded now (3.11+): ``address``, ``qualname``,
    ``filename``, ``firstlineno``, ``python_version`` and ``instructions`` (see docs/json-format.md)."""
    ...

def specialization_watch(pid: int, duration_s: float, rate_hz: float = 500.0, read_interval_s: float = 0.01,
                         max_codes: int = 200, stop: LoadStop | None = None) -> dict:
    """Sample ``pid`` for ``duration_s`` and follow its hot code objects (docs/json-format.md, Specialization);
    setting ``stop`` ends it early with what was read so far."""
    ...
