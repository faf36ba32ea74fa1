"""Shared and private memory of a prefork master and its workers over time, copy-on-write by cause.

  gilty memory --pid MASTER --duration 30
  gilty memory --pid MASTER --duration 60 --format json -o memory.json
  gilty memory --pid MASTER --duration 30 --faults -o faults.html

Measures the master and every descendant (workers that start or are replaced during the run
too): RSS, PSS, USS, shared/private clean/dirty and minor faults every --interval; which pages
shared with the master each worker copied, during garbage collection or outside it; each
process's GC configuration. Ends at --duration, Ctrl-C, or when the master exits. --faults also
samples each worker's page faults that copy a page shared with the master and names the Python
function (and C function) whose write copied it (docs/memory-faults.md).
"""

from __future__ import annotations

import argparse

from gilty import report
from gilty._errors import UsageError
from gilty.cli.options import add_format_argument, bounded_float, check_output, output_format, pid_number, seconds
from gilty.memory import run as memory
from gilty.memory.run import DEFAULT_GC_POLL_MS, DEFAULT_INTERVAL_S, MIN_INTERVAL_S
from gilty.options import MemoryOptions, OutputOptions
from gilty.sampling import capture

# html: the shared report page with a memory part (report/memory/html.py).
FORMATS = ("text", "json", "html")


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = "gilty memory --pid MASTER [--duration S] [--interval S] [--gc-poll MS] [--faults [--fault-period N]] [-o FILE] [--format {text,json,html}]"
    parser.add_argument("--pid", type=pid_number, required=True, help="the master (parent) process of the tree")
    parser.add_argument(
        "--duration", type=seconds, metavar="S", help="stop after S seconds (default: until Ctrl-C or the master exits)"
    )
    parser.add_argument(
        "--interval",
        type=seconds,
        default=DEFAULT_INTERVAL_S,
        metavar="S",
        help="seconds between measurements of every process (default: %(default)g)",
    )
    parser.add_argument(
        "--gc-poll",
        type=bounded_float(0.0, 60_000.0),
        default=DEFAULT_GC_POLL_MS,
        metavar="MS",
        help="milliseconds between reads of each process's GC flag (default: %(default)g)",
    )
    parser.add_argument(
        "--faults",
        action="store_true",
        help="sample the workers' page faults that copy pages shared with the master, with their Python stacks",
    )
    parser.add_argument(
        "--fault-period",
        type=int,
        default=1,
        metavar="N",
        help="with --faults: sample every Nth minor fault of each worker thread (default: %(default)s)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    add_format_argument(parser, FORMATS)


def run(args: argparse.Namespace) -> int:
    options = memory_options(args)
    with capture.Stop() as stop:
        session = memory.run(options, stop)
    report.write(session, options.output.format, options.output.path)
    return memory.exit_status(session)


def memory_options(args: argparse.Namespace) -> MemoryOptions:
    fmt = output_format(args.format, args.output, FORMATS)
    check_output(args.output)
    if not 0.1 <= args.gc_poll <= 1000:
        raise UsageError("--gc-poll must be between 0.1 and 1000 ms")
    if not 1 <= args.fault_period <= 1_000_000:
        raise UsageError("--fault-period must be between 1 and 1000000")
    if args.fault_period != 1 and not args.faults:
        raise UsageError("--fault-period needs --faults")
    return MemoryOptions(
        args.pid,
        max(args.interval, MIN_INTERVAL_S),
        args.gc_poll,
        args.duration,
        OutputOptions(fmt, args.output),
        faults=args.faults,
        fault_period=args.fault_period,
    )


# the program's parse step (gilty.cli.parse_options) asks each command for its options by this name
build_options = memory_options
