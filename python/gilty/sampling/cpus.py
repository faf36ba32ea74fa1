"""The CPUs a target may run on: its affinity (taskset, os.sched_setaffinity), which the kernel keeps
within its cpuset (a container's `--cpuset-cpus`). A process held to fewer CPUs than the host has is
saturated sooner than the host's load says; the saturation line names the limit."""

from __future__ import annotations

import os
from typing import Optional


def _cpu_list(text: str) -> set:
    """{0, 2, 3} from the kernel's "0,2-3"."""
    out: set = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _sep, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _cpuset_cpus(pid: int) -> Optional[set]:
    """The CPUs of the process's cpuset (cgroup v2 `cpuset.cpus.effective`, or v1's `cpuset.effective_cpus`)."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if controllers == "":
            candidates = [f"/sys/fs/cgroup{path}/cpuset.cpus.effective", f"/sys/fs/cgroup/unified{path}/cpuset.cpus.effective"]
        elif "cpuset" in controllers.split(","):
            candidates = [f"/sys/fs/cgroup/cpuset{path}/cpuset.effective_cpus", f"/sys/fs/cgroup/cpuset{path}/cpuset.cpus"]
        else:
            continue
        for candidate in candidates:
            try:
                with open(candidate) as f:
                    cpus = _cpu_list(f.read())
            except (OSError, ValueError):
                continue
            if cpus:
                return cpus
    return None


def allowed_cpus(pid: int) -> Optional[dict]:
    """{"allowed": n, "host": m, "by": "cpuset" | "affinity"} for a live process; None once it is gone."""
    try:
        allowed = os.sched_getaffinity(pid)
    except OSError:
        return None
    host = os.cpu_count() or len(allowed)
    cpuset = _cpuset_cpus(pid)
    by = "cpuset" if cpuset is not None and len(cpuset) < host and allowed >= cpuset else "affinity"
    return {"allowed": len(allowed), "host": host, "by": by}
