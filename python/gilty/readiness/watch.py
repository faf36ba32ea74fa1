"""Reading the target's modules while it is recorded: a program imports as it goes (a `-- CMD`
target has imported nothing yet when gilty attaches), so the scan is repeated every few seconds and
once at the end, and the last one that read is kept (marked partial where some module did not
read); a target gone before the end keeps its last."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from gilty.readiness import modules

# Seconds between scans while recording (one scan reads sys.modules: a few hundred small reads).
EVERY_S = 2.0


class ModuleWatch:
    def __init__(self, target: Any, native_error: type, clock: Callable[[], float] = time.monotonic) -> None:
        self.target = target
        self.native_error = native_error
        self.clock = clock
        self.raw: Optional[dict] = None
        self.error: Optional[str] = None
        self._next = 0.0

    def poll(self) -> None:
        now = self.clock()
        if now >= self._next:
            self._next = now + EVERY_S
            self.read()

    def read(self) -> None:
        try:
            raw = modules.read(self.target)
        except self.native_error as e:
            if self.raw is None:
                self.error = str(e)
            return
        # The latest wins, partial or not: modules are only added as the program runs, and a scan
        # was already retried over a torn read (module_slots.rs `scan`).
        self.raw, self.error = raw, None

    def result(self, slowdown: float) -> dict:
        return {"slowdown": slowdown, "modules": self.raw, "modules_error": self.error}
