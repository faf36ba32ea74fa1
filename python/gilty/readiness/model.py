"""What the readiness analysis returns: modules, per-group bounds and the verdict of each process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gilty.readiness.bound import Bound

# Modules the runtime creates itself rather than imports (single-phase, never a GIL switch).
CORE_MODULES = frozenset({"sys", "builtins"})


@dataclass(frozen=True)
class ModuleInfo:
    """One extension module of the target (crates/gilty-core/src/interp/module_slots.rs)."""

    name: str
    init: str  # "multi-phase" | "single-phase" | "export" (3.15 PyModExport)
    gil: str  # "not_used" | "used" | "undeclared" | "unknown"
    path: Optional[str]
    builtin: bool
    package: str  # the distribution's import name, "stdlib", "builtin" or "" when not told
    dist: Optional[str] = None  # "name-version" of the .dist-info listing the file, when found
    unknown_why: Optional[str] = None
    def_name: Optional[str] = None

    @property
    def blocks(self) -> bool:
        """Importing it turns the GIL back on in a free-threaded build (3.13t+)."""
        return self.gil in ("used", "undeclared") and self.name not in CORE_MODULES

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "init": self.init,
            "gil": self.gil,
            "blocks": self.blocks,
            "path": self.path,
            "builtin": self.builtin,
            "package": self.package,
            "dist": self.dist,
            "unknown_why": self.unknown_why,
        }


@dataclass
class ModuleScan:
    """The modules as read (None when not read) and why not, or what is partial about them."""

    modules: Optional[list] = None  # [ModuleInfo]
    note: Optional[str] = None  # why not read, or "partial: ..." for a torn read
    python_version: str = ""

    @property
    def known(self) -> bool:
        """The Py_mod_gil slot exists (3.13+) and the modules were read."""
        return self.modules is not None and not self.python_version.startswith(("3.10", "3.11", "3.12"))

    @property
    def blockers(self) -> list:
        return [m for m in self.modules or [] if m.blocks]


@dataclass
class GroupReadiness:
    label: str  # "process" or a pool's label
    tids: list
    bound: Bound


@dataclass
class ProcessReadiness:
    pid: int
    python_version: str
    slowdown: float
    process: GroupReadiness
    pools: list = field(default_factory=list)  # [GroupReadiness] of pools of 2+ threads
    modules: ModuleScan = field(default_factory=ModuleScan)
    worth: bool = False
    verdict: str = ""
    reasons: list = field(default_factory=list)
    assumptions: list = field(default_factory=list)
