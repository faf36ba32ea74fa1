"""What `summarise` returns: per-thread summaries, the verdict and the whole summary of a session."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gilty.sampling.analysis.convoy import ConvoyStats
from gilty.sampling.analysis.exact import ExactSummary
from gilty.sampling.analysis.saturation import Saturation
from gilty.sampling.analysis.states import ThreadStates
from gilty.sampling.session import Session


@dataclass
class ThreadSummary:
    tid: int
    name: str
    states: ThreadStates
    idle_syscalls: dict  # {syscall name: fraction of the thread's samples}
    idle_kinds: dict  # {"lock wait" | "sleep" | "I/O wait" | ...: fraction of the thread's samples}
    top_functions: list  # [FunctionShare]
    blame: list  # [BlameShare], the largest entries
    convoy: ConvoyStats
    # Every (holder, function, file) -> [samples, {line: samples}] of this thread's waits, for the
    # verdict: the truncated `blame` list would under-count a holder spread over many functions.
    blame_counts: dict = field(default_factory=dict)
    # Samples in which the thread was handling an exception (inside `except`, or a `finally` run by
    # one): its time in error paths.
    handling_samples: int = 0
    size: int = 1  # threads this summary stands for: more than 1 for a pool merged (analysis/pooled.py)

    @property
    def samples(self) -> int:
        return self.states.samples

    @property
    def handling_share(self) -> float:
        return self.handling_samples / self.samples if self.samples else 0.0


@dataclass
class Verdict:
    text: str
    kinds: list = field(default_factory=list)  # "contention", "convoy", "gc", "native", ...


@dataclass
class Summary:
    session: Session
    gil_utilisation: float
    gc_share: float
    mean_waiting_threads: float
    threads: list  # [ThreadSummary], most GIL-holding first
    verdict: Optional[Verdict] = None
    exact: Optional[ExactSummary] = None  # exact (uprobe) figures, with --exact
    saturation: Optional[Saturation] = None  # the kernel's run-queue delay and cgroup throttling

    @property
    def samples(self) -> int:
        return self.session.samples

    def thread(self, tid: int) -> Optional[ThreadSummary]:
        return next((t for t in self.threads if t.tid == tid), None)
