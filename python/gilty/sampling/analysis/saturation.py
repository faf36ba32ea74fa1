"""Is the host (or the target's cgroup) short of CPU? From the kernel's scheduler counters read at the
ends of each batch (docs/states.md, "Waiting for a CPU"), and the `cpu_wait` samples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gilty.sampling.session import CPU_WAIT, Session

# Run-queue delay per runnable thread at or above this (ms per s, i.e. ‰) reads as saturated: 5 % of
# the time a thread wants a CPU and has none.
SATURATED_MS_PER_S = 50.0
# A cgroup throttled in at least this share of its enforcement periods has its quota spent.
THROTTLED_NOTABLE = 0.05


@dataclass
class Saturation:
    seconds: float
    threads: int  # threads that ran or waited for a CPU during the recording
    run_delay_ms_per_s: float  # mean over those threads: ms of run-queue wait per second
    max_run_delay_ms_per_s: float
    cgroup_periods: Optional[int] = None
    cgroup_throttled: Optional[int] = None
    cgroup_throttled_ms_per_s: Optional[float] = None
    cpu_wait_share: float = 0.0  # share of all thread samples in cpu_wait
    holder_cpu_wait_share: float = 0.0  # share of passes in which the GIL's holder had no CPU
    cpus_allowed: Optional[int] = None  # CPUs the target may run on, when fewer than the host's
    host_cpus: Optional[int] = None
    cpus_by: Optional[str] = None  # "affinity" or "cpuset": what holds it to them

    @property
    def throttled_share(self) -> Optional[float]:
        if not self.cgroup_periods:
            return None
        return (self.cgroup_throttled or 0) / self.cgroup_periods

    @property
    def saturated(self) -> bool:
        throttled = self.throttled_share
        return self.run_delay_ms_per_s >= SATURATED_MS_PER_S or (throttled is not None and throttled >= THROTTLED_NOTABLE)

    def line(self) -> str:
        """One line for every report: what the kernel says about CPU supply."""
        head = "host CPU saturated" if self.saturated else "host CPU not saturated"
        text = f"{head}: run queue delay {self.run_delay_ms_per_s:.0f} ms/s per thread"
        if self.threads > 1:
            text += f" (worst {self.max_run_delay_ms_per_s:.0f} ms/s)"
        if self.throttled_share is not None:
            text += (
                f"; cgroup throttled {100 * self.throttled_share:.0f} % of periods ({self.cgroup_throttled_ms_per_s:.0f} ms/s)"
            )
        else:
            text += "; no cgroup CPU quota seen"
        if self.cpus_allowed is not None:
            text += f"; the target may run on {self.cpus_allowed} of the host's {self.host_cpus} CPUs (its {self.cpus_by})"
        return text

    def to_dict(self) -> dict:
        return {
            "saturated": self.saturated,
            "seconds": round(self.seconds, 3),
            "threads": self.threads,
            "run_delay_ms_per_s": round(self.run_delay_ms_per_s, 2),
            "max_run_delay_ms_per_s": round(self.max_run_delay_ms_per_s, 2),
            "cgroup_periods": self.cgroup_periods,
            "cgroup_throttled_periods": self.cgroup_throttled,
            "cgroup_throttled_share": None if self.throttled_share is None else round(self.throttled_share, 4),
            "cgroup_throttled_ms_per_s": None
            if self.cgroup_throttled_ms_per_s is None
            else round(self.cgroup_throttled_ms_per_s, 2),
            "cpu_wait_share": round(self.cpu_wait_share, 4),
            "holder_cpu_wait_share": round(self.holder_cpu_wait_share, 4),
            "cpus_allowed": self.cpus_allowed,
            "host_cpus": self.host_cpus,
            "cpus_by": self.cpus_by,
            "line": self.line(),
        }


def saturation(session: Session) -> Optional[Saturation]:
    """None when no scheduler counters were recorded (a session saved by an older gilty)."""
    sched = session.sched
    seconds = float(sched.get("seconds") or 0.0)
    if seconds <= 0:
        return None
    # Threads blocked all along neither ran nor waited: they would dilute the mean.
    rates = [delay / 1e6 / seconds for run, delay in sched["threads"].values() if run or delay]
    samples = sum(session.counts.values())
    waiting = sum(n for (_tid, state, _stack), n in session.counts.items() if state == CPU_WAIT)
    sat = Saturation(
        seconds=seconds,
        threads=len(rates),
        run_delay_ms_per_s=sum(rates) / len(rates) if rates else 0.0,
        max_run_delay_ms_per_s=max(rates, default=0.0),
        cpu_wait_share=waiting / samples if samples else 0.0,
        holder_cpu_wait_share=session.passes_holder_cpu_wait() / session.samples if session.samples else 0.0,
    )
    cpus = sched.get("cpus")
    if cpus and cpus["allowed"] < cpus["host"]:
        sat.cpus_allowed, sat.host_cpus, sat.cpus_by = cpus["allowed"], cpus["host"], cpus["by"]
    cgroup = sched.get("cgroup")
    if cgroup is not None and cgroup[0]:
        sat.cgroup_periods, sat.cgroup_throttled = int(cgroup[0]), int(cgroup[1])
        sat.cgroup_throttled_ms_per_s = cgroup[2] / 1e6 / seconds
    return sat
