"""Show every thread of a Python process once: name, tid, state and Python stack.

gilty dump --pid 4242
gilty dump --pid MASTER --subprocesses     # the master and every Python descendant
gilty dump --pid 4242 --locals             # with each frame's arguments and local variables
gilty dump --pid 4242 --native             # with each thread's C frames between its Python frames
gilty dump --pid 4242 --tasks              # and every asyncio task, as a tree per event loop
gilty dump --core core.4242                # the same, from a core file (gcore, systemd-coredump)
gilty dump --core core.4242 --exe /opt/py/bin/python3.12   # the interpreter, where it moved
"""

from __future__ import annotations

import argparse

from gilty import report
from gilty._errors import EXIT_OK, UsageError
from gilty.cli.options import add_format_argument, add_pid_arguments
from gilty.sampling import snapshots
from gilty.sampling.snapshots import DumpOptions


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_pid_arguments(parser)
    parser.add_argument(
        "--core", metavar="CORE", help="read a core file of a Python process instead of a running one (docs/core-files.md)"
    )
    parser.add_argument(
        "--exe", metavar="PYTHON", help="with --core: the interpreter the process ran, when it is not at the path the core names"
    )
    parser.add_argument("--sysroot", metavar="DIR", help="with --core: look for every file the process mapped under DIR first")
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
    if args.core is not None:
        if args.pid or args.subprocesses:
            raise UsageError("--core reads one core file: not with --pid or --subprocesses")
        options = DumpOptions((), tasks=args.tasks, locals=args.locals, native=args.native, format=args.format or "text")
        report.write(snapshots.run_core(options, args.core, args.exe, args.sysroot), options.format, None)
        return EXIT_OK
    if args.exe is not None or args.sysroot is not None:
        raise UsageError("--exe and --sysroot go with --core")
    if not args.pid:
        raise UsageError("give --pid PID (a running process) or --core CORE (a core file)")
    options = DumpOptions(args.pid, args.subprocesses, args.tasks, args.locals, args.native, args.format or "text")
    report.write(snapshots.run(options), options.format, None)
    return EXIT_OK
