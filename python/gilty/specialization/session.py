"""What one ``gilty specialization`` run observed: per process, the native watch result
(``_native.specialization_watch``: hot code objects, their instructions' samples, last decoded form
and counter, and each site's history over the reads). Saved and loaded as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

SCHEMA = "gilty.specialization/1"


@dataclass
class ProcessWatch:
    """One process's watch result, as ``_native.specialization_watch`` returned it."""

    pid: int
    raw: dict

    @property
    def python_version(self) -> str:
        return self.raw["python_version"]

    @property
    def minor(self) -> tuple:
        return tuple(int(x) for x in self.python_version.split(".")[:2])

    def source(self, filename: str) -> dict:
        """{"lines": {"N": text}, "not_shown": why} as read from the target at the end of the run
        (``specialization/sources.py``); {} for a report saved without them. Never read here."""
        return (self.raw.get("sources") or {}).get(filename) or {}


@dataclass
class SpecializationSession:
    requested_duration_s: float
    rate_hz: float
    read_interval_s: float
    processes: list = field(default_factory=list)  # [ProcessWatch]
    # pid -> one-line reason a process was not watched (a worker that exited, 3.10, ...).
    skipped: dict = field(default_factory=dict)
    partial_reason: Optional[str] = None

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "requested_duration_s": self.requested_duration_s,
            "rate_hz": self.rate_hz,
            "read_interval_s": self.read_interval_s,
            "processes": [p.raw for p in self.processes],
            "skipped": {str(k): v for k, v in self.skipped.items()},
            "partial_reason": self.partial_reason,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "SpecializationSession":
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document (schema {d.get('schema')!r})")
        s = cls(d["requested_duration_s"], d["rate_hz"], d["read_interval_s"])
        s.processes = [ProcessWatch(p["pid"], p) for p in d["processes"]]
        s.skipped = {int(k): v for k, v in d.get("skipped", {}).items()}
        s.partial_reason = d.get("partial_reason")
        return s
