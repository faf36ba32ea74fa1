"""Show every thread of a Python process once: name, tid, state and Python stack.

gilty dump --pid 4242
"""

from __future__ import annotations

import argparse

from gilty import launch
from gilty._errors import EXIT_OK
from gilty.cli.record import add_format_argument, emit, positive_int
from gilty.renderers import console, json_report


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pid", type=positive_int, required=True, help="the process to inspect")
    add_format_argument(parser)


def run(args: argparse.Namespace) -> int:
    native = launch.native_module()
    target = launch.attach(native, args.pid)
    target_info = {
        "pid": target.pid,
        "python_version": target.python_version,
        "executable": target.executable,
        "switch_interval_s": target.switch_interval_s,
    }
    snapshot = target.dump()
    renderer = json_report.render_dump if args.format == "json" else console.render_dump
    emit(renderer(target_info, snapshot, native.syscall_name), None)
    return EXIT_OK
