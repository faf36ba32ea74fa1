"""Show every thread of a Python process once: name, tid, state and Python stack.

gilty dump --pid 4242
gilty dump --pid MASTER --subprocesses     # the master and every Python descendant
gilty dump --pid 4242 --locals             # with each frame's arguments and local variables
gilty dump --pid 4242 --native             # with each thread's C frames between its Python frames
gilty dump --pid 4242 --tasks              # and every asyncio task, as a tree per event loop
"""

from __future__ import annotations

import argparse

from gilty import report
from gilty._errors import EXIT_OK
from gilty.cli.options import add_format_argument, add_pid_arguments
from gilty.sampling import snapshots
from gilty.sampling.snapshots import DumpOptions


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_pid_arguments(parser, required=True)
    add_format_argument(parser)
    parser.add_argument(
        "--tasks", action="store_true", help="also read every asyncio task: state, coroutine stack, what it awaits, who awaits it"
    )
    parser.add_argument(
        "--locals",
        action="store_true",
        help="show each frame's arguments and local variables (builtins by value, other objects by type and address)",
    )
    parser.add_argument(
        "--native",
        action="store_true",
        help="show each thread's native (C) frames between its Python frames, sampled by the kernel (perf events; the target is not stopped)",
    )


def run(args: argparse.Namespace) -> int:
    options = DumpOptions(args.pid, args.subprocesses, args.tasks, args.locals, args.native, args.format or "text")
    report.write(snapshots.run(options), options.format, None)
    return EXIT_OK
