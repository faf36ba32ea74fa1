"""What one `gilty load` run is asked to do, read once from the command line: the load (gilty's
open-loop generator or Locust's users), the server (a pid to profile or a command to start) and
where the report goes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional

from gilty.load.locust import LocustOptions
from gilty.load.plan import GeneratorOptions
from gilty.load.sites import AppScope
from gilty.options import OutputOptions

DEFAULT_DURATION_S = 10.0
DEFAULT_STEP_S = 5.0
SERVER_WARMUP_S = 1.0  # unmeasured load on a server gilty started, unless --warmup says otherwise


@dataclass(frozen=True)
class ServerOptions:
    """The server under load: profiled by pid, or started from a command (then stopped at the end)."""

    pid: Optional[int] = None
    command: Optional[list] = None
    warmup_s: Optional[float] = None  # as given; see ``warmup``
    app: AppScope = AppScope()
    tasks: bool = False
    loop_lag_s: float = 0.02

    @property
    def profiled(self) -> bool:
        return self.pid is not None or self.command is not None

    def warmup(self, started: bool) -> Optional[float]:
        """--warmup, else a second for a server gilty started (it has not answered anything yet)."""
        if self.warmup_s is not None:
            return self.warmup_s
        return SERVER_WARMUP_S if started else None


@dataclass(frozen=True)
class LoadOptions:
    server: ServerOptions
    duration_s: float
    # gilty's generator: its requests, and the rates of the run (one, or a ramp's steps)
    generator: Optional[GeneratorOptions] = None
    rates: tuple = ()
    ramp: bool = False
    slo: Optional[tuple] = None  # ("p99", seconds)
    # or Locust's users instead
    locust: Optional[LocustOptions] = None
    output: OutputOptions = OutputOptions()


def trailing_output(output: Optional[str], command: Optional[list]) -> tuple:
    """`-- SERVER ARGS -o run.html`: a trailing ``-o FILE`` / ``--output FILE`` / ``--output=FILE`` after
    the server command is gilty's report file when gilty's own -o was not given before ``--``.
    Returns (output, server command)."""
    if not command or output is not None:
        return output, command
    if len(command) >= 3 and command[-2] in ("-o", "--output"):
        path, server = command[-1], command[:-2]
    elif len(command) >= 2 and command[-1].startswith("--output="):
        path, server = command[-1].split("=", 1)[1], command[:-1]
    else:
        return output, command
    if not path:
        return output, command
    print(
        f"gilty: the trailing `-o {path}` is gilty's: the report goes to {path} (to pass -o to the server, "
        "give gilty's -o before --)",
        file=sys.stderr,
    )
    return path, server
