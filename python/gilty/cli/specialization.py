"""Which hot instructions the adaptive interpreter specialized, which miss, and what that costs.

  gilty specialization --pid PID --duration 5
  gilty specialization --pid MASTER --subprocesses --format json -o spec.json

Samples where each running thread's innermost frame stands (time-weighted, down to the
instruction) and re-reads the hot code objects' adaptive bytecode (co_code_adaptive) from
outside every --read-interval, without writing to the target. Reports per site its form
(specialized, warming, backoff, cold), what its counter means, an estimate of the executions
that miss or run the generic path, and the costliest sites with their likely cause.
CPython 3.11, 3.12 and 3.13. On 3.10, the opcache that preceded specialization: which hot code
objects have one and whether each LOAD_GLOBAL / LOAD_ATTR / LOAD_METHOD entry is in use.
"""

from __future__ import annotations

import argparse

from gilty import report
from gilty.cli.options import (
    add_format_argument,
    bounded_float,
    check_output,
    output_format,
    pid_number,
    positive_int,
    sampling_rate,
    seconds,
)
from gilty.options import OutputOptions, SpecializationOptions
from gilty.sampling import capture
from gilty.specialization import run as specialization
from gilty.specialization.run import DEFAULT_DURATION_S, DEFAULT_RATE_HZ, DEFAULT_READ_INTERVAL_MS, DEFAULT_TOP


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "gilty specialization --pid PID [--duration S] [--top N] [--format {text,json,html}] [-o FILE] [--subprocesses]"
    )
    parser.add_argument("--pid", type=pid_number, required=True, help="the process to read")
    parser.add_argument(
        "--duration", type=seconds, default=DEFAULT_DURATION_S, metavar="S", help="seconds to sample (default: %(default)g)"
    )
    parser.add_argument(
        "--top", type=positive_int, default=DEFAULT_TOP, metavar="N", help="sites and functions listed (default: %(default)d)"
    )
    parser.add_argument(
        "--rate",
        type=sampling_rate,
        default=DEFAULT_RATE_HZ,
        metavar="HZ",
        help="samples of every thread per second (default: %(default)g)",
    )
    parser.add_argument(
        "--read-interval",
        type=bounded_float(0.0, 60_000.0),
        default=DEFAULT_READ_INTERVAL_MS,
        metavar="MS",
        help="milliseconds between reads of the hot code objects (default: %(default)g)",
    )
    parser.add_argument("-s", "--subprocesses", action="store_true", help="also every Python descendant (a server's workers)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    add_format_argument(parser, choices=("text", "json", "html"))


def run(args: argparse.Namespace) -> int:
    options = specialization_options(args)
    with capture.Stop() as stop:
        result = specialization.run(options, stop)
    report.write(result, options.output.format, options.output.path)
    return specialization.exit_status(result)


def specialization_options(args: argparse.Namespace) -> SpecializationOptions:
    fmt = output_format(args.format, args.output, ("text", "json", "html"))
    check_output(args.output)
    return SpecializationOptions(
        pid=args.pid,
        duration_s=args.duration,
        rate_hz=args.rate,
        read_interval_ms=args.read_interval,
        top=args.top,
        subprocesses=args.subprocesses,
        output=OutputOptions(fmt, args.output),
        opcache_output=fmt in report.formats("opcache"),
    )


# the program's parse step (gilty.cli.parse_options) asks each command for its options by this name
build_options = specialization_options
