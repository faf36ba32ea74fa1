"""What `gilty dump` hands to the report layer: one snapshot per process read. A plain class, not a
dataclass: `gilty dump` starts without importing more than it needs."""

from __future__ import annotations


class Dump:
    """``snapshots`` are ``(target_info, snapshot)`` pairs; ``syscall_name`` names a syscall number
    (the native module's); ``skipped`` lists ``{"pid", "reason"}`` of descendants not read. A dump of
    one process without ``--subprocesses`` is ``single``: its JSON is that process's report alone."""

    __slots__ = ("snapshots", "syscall_name", "skipped", "single")

    def __init__(self, snapshots: list, syscall_name, skipped: list = (), single: bool = False):
        self.snapshots = snapshots
        self.syscall_name = syscall_name
        self.skipped = list(skipped)
        self.single = single
