"""Show every thread of a Python process once: name, tid, state and Python stack.

gilty dump --pid 4242
gilty dump --pid MASTER --subprocesses     # the master and every Python descendant
gilty dump --pid 4242 --locals             # with each frame's arguments and local variables
gilty dump --pid 4242 --native             # with each thread's C frames between its Python frames
gilty dump --pid 4242 --tasks              # and every asyncio task, as a tree per event loop
"""

from __future__ import annotations

import argparse
import sys

from gilty import report
from gilty._errors import EXIT_OK
from gilty._visible import visible
from gilty.cli.options import add_format_argument, add_pid_arguments
from gilty.sampling.attach import attach, child_pids, native_module
from gilty.sampling.dump import Dump


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


def _snapshot(
    native, pid: int, tasks: bool = False, with_locals: bool = False, positions: bool = False, with_native: bool = False
) -> tuple:
    target = attach(native, pid)
    target_info = {
        "pid": target.pid,
        "python_version": target.python_version,
        "executable": target.executable,
        "switch_interval_s": target.switch_interval_s,
    }
    # Positions (3.11+ column ranges) are in the JSON form only: the text keeps py-spy's layout.
    if with_native:
        snapshot = target.dump(locals=with_locals, positions=positions, native=True)
    elif with_locals or positions:
        snapshot = target.dump(locals=with_locals, positions=positions)
    else:
        snapshot = target.dump()
    if tasks:
        snapshot["tasks"] = target.tasks()
    return target_info, snapshot


def run(args: argparse.Namespace) -> int:
    native = native_module()
    roots = list(dict.fromkeys(args.pid))
    if len(roots) == 1 and not args.subprocesses:
        target_info, snapshot = _snapshot(native, roots[0], args.tasks, args.locals, args.format == "json", args.native)
        report.write(Dump([(target_info, snapshot)], native.syscall_name, single=True), args.format or "text", None)
        return EXIT_OK
    # The given pids must be Python (as for one pid); descendants that are not are skipped.
    pids = list(roots)
    if args.subprocesses:
        for root in roots:
            pids += [p for p in child_pids(root) if p not in pids]
    dumps, skipped = [], []
    for pid in pids:
        try:
            dumps.append(_snapshot(native, pid, args.tasks, args.locals, args.format == "json", args.native))
        except native.GiltyError as e:
            if pid in roots and getattr(e, "kind", None) == "no_such_process":
                raise
            if pid in roots and not args.subprocesses:
                raise
            skipped.append({"pid": pid, "reason": str(e)})
            print(f"gilty: skipping pid {pid}: {visible(str(e), 0)}", file=sys.stderr)  # names the target's executable
    report.write(Dump(dumps, native.syscall_name, skipped), args.format or "text", None)
    return EXIT_OK
