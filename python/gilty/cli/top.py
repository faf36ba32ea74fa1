"""Live view: each thread's state shares over the last second, and where it is.

  gilty top --pid 4242
  gilty top --pid MASTER -s --sort wait     # a server: master and workers, pools on one line

Refreshes every second (in place on a terminal, fitted to it; one block per second otherwise)
until q, Ctrl-C, SIGTERM, every process's exit, or --duration. On a terminal, h / w / c sort by
GIL held, GIL waited for, or CPU.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext

from gilty.cli.options import (
    DEFAULT_RATE_HZ,
    add_duration_argument,
    add_exact_argument,
    add_pid_arguments,
    add_rate_argument,
    top_options,
)
from gilty.report.live import Keys, Screen
from gilty.report.recording import text_processes as console_processes
from gilty.sampling import capture, top_run


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_pid_arguments(parser, required=True)
    parser.add_argument(
        "--sort",
        choices=console_processes.SORT_KEYS,
        default="hold",
        help="order processes and threads by GIL held, GIL waited for, or CPU (default: %(default)s)",
    )
    add_rate_argument(parser, DEFAULT_RATE_HZ)
    add_duration_argument(parser)
    add_exact_argument(parser)


def run(args: argparse.Namespace) -> int:
    options = top_options(args)
    tty_out = sys.stdout.isatty()
    # Keys are read on a terminal, and only where the screen has its sort keys (not with --exact).
    with capture.Stop() as stop, nullcontext(None) if options.sampling.exact else Keys() as keys:
        screen = Screen(sys.stdout, tty_out, options.sort, keys if tty_out else None)
        return top_run.run(
            options, capture.stop_when(lambda: stop.requested, screen.quit), screen.one, screen.processes, screen.on_slice
        )


# the program's parse step (gilty.cli.parse_options) asks each command for its options by this name
build_options = top_options
