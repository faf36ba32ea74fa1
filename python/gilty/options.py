"""What a command is asked to do, as typed options read once from the command line.

The groups several commands share live here, and one dataclass per command holds its groups and its
own options: `gilty.cli.options` builds them from argparse's namespace (``record_options(args)``...),
and a capability's ``run(options, stop)`` reads nothing else. Frozen: an option is never changed
along the way.

    TargetOptions    what to look at: --pid (repeatable), -s/--subprocesses, `-- CMD [ARG ...]`
    SamplingOptions  how: --rate, --duration, --native, --exact, --tasks
    OutputOptions    where the result goes: the format, -o, and what pictures draw (--idle, ...)

Commands with options of their own add a dataclass beside these (RecordOptions, TopOptions,
ServeOptions here; `gilty load`'s are gilty.load.options).
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Optional


@dataclass(frozen=True)
class TargetOptions:
    """The processes a command looks at: ``pids`` it attaches to, or a ``command`` it starts (and
    stops at the end); with ``subprocesses``, their Python descendants too."""

    pids: tuple = ()
    subprocesses: bool = False
    command: Optional[list] = None  # `-- CMD [ARG ...]`

    @property
    def several(self) -> bool:
        """More than one process is (or may become) the target: recorded as a process set."""
        return self.subprocesses or len(self.pids) > 1


@dataclass(frozen=True)
class SamplingOptions:
    rate_hz: float
    duration_s: Optional[float] = None  # None: until Ctrl-C, SIGTERM or the target's exit
    native: bool = False  # each thread's C stack too (perf events)
    exact: bool = False  # every GIL acquisition and collection traced with uprobes
    tasks: bool = False  # every asyncio task read in each pass

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz


@dataclass(frozen=True)
class OutputOptions:
    """Where a result goes and in which format (already chosen: --format, else -o's extension);
    ``idle``, ``merge_workers`` and ``lines`` are what flame graphs, speedscope and collapsed stacks
    draw (gilty.report.pictures.PictureOptions)."""

    format: str = "text"
    path: Optional[str] = None  # None: stdout
    idle: bool = False
    merge_workers: Optional[bool] = None  # None: merged when the recording holds workers
    lines: bool = True
    source_functions: int = 15  # the HTML report's source view (docs/source-view.md)


@dataclass(frozen=True)
class RecordOptions:
    target: TargetOptions
    sampling: SamplingOptions
    output: OutputOptions
    gates: tuple = ()  # parsed --fail-if expressions (gilty.sampling.analysis.gates)
    free_threading: Optional[float] = None  # --free-threading: the slowdown assumed; None when not asked


@dataclass(frozen=True)
class TopOptions:
    target: TargetOptions
    sampling: SamplingOptions
    sort: str = "hold"  # the first order of processes and threads; a key press changes it


@dataclass(frozen=True)
class ServeOptions:
    target: TargetOptions
    sampling: SamplingOptions
    bind: str = "127.0.0.1"
    port: int = 9464
    per_thread: bool = False  # one series per thread id instead of per thread name


@dataclass(frozen=True)
class MemoryOptions:
    pid: int  # the master of the tree
    interval_s: float  # between measurements of every process
    gc_poll_ms: float  # between reads of each process's GC flag
    duration_s: Optional[float] = None  # None: until Ctrl-C, SIGTERM or the master's exit
    output: OutputOptions = OutputOptions()
    faults: bool = False  # sample the workers' page faults that copy shared pages, with their stacks
    fault_period: int = 1  # every Nth minor fault of a thread is a sample

    @property
    def gc_poll_s(self) -> float:
        return self.gc_poll_ms / 1e3


@dataclass(frozen=True)
class SpecializationOptions:
    pid: int
    duration_s: float
    rate_hz: float
    read_interval_ms: float  # between reads of the hot code objects
    top: int = 10  # sites and functions listed
    subprocesses: bool = False  # every Python descendant too
    output: OutputOptions = OutputOptions()
    opcache_output: bool = True  # the format can show Python 3.10's opcache reading (text, json)

    @property
    def read_interval_s(self) -> float:
        return self.read_interval_ms / 1e3


@dataclass(frozen=True)
class CompareOptions:
    a: str  # the baseline's JSON report (`gilty load` or `gilty record`)
    b: str
    output: OutputOptions = OutputOptions()
