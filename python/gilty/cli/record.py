"""Sample a Python process and report who holds the GIL, who waits for it, and why.

Attach to a running process with --pid, or start one after `--`:

  gilty record --pid 4242 --duration 10
  gilty record --pid MASTER --subprocesses --duration 10   # a server: master and every worker
  gilty record --format json -o report.json -- python app.py

Sampling runs until --duration ends, the target exits, or Ctrl-C (the summary is still
printed). The command's own output goes to gilty's stderr. On a terminal, one line on stderr shows
the recording's progress (sampling/capture.py).
"""

from __future__ import annotations

import argparse

from gilty import report as reports
from gilty.cli.options import (
    DEFAULT_RATE_HZ,
    add_duration_argument,
    add_exact_argument,
    add_format_argument,
    add_free_threading_arguments,
    add_native_argument,
    add_output_argument,
    add_picture_arguments,
    add_pid_arguments,
    add_rate_argument,
    add_tasks_argument,
    picture_options,
    record_options,
)
from gilty.sampling import capture, record_run

ACCEPTS_CHILD_COMMAND = True


# -- the command ------------------------------------------------------------------------------


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "gilty record (--pid PID [--pid PID ...] | -- CMD [ARG ...]) [-s] [--duration S] [--rate HZ] [--exact] "
        "[--tasks] [--native] [--free-threading [--ft-slowdown PCT]] [-o FILE] [--format FORMAT]"
    )
    add_pid_arguments(parser)
    add_duration_argument(parser)
    add_rate_argument(parser, DEFAULT_RATE_HZ)
    add_output_argument(parser)
    add_format_argument(parser, reports.FORMAT_NAMES)
    add_picture_arguments(parser)
    add_exact_argument(parser)
    add_tasks_argument(parser)
    add_native_argument(parser)
    add_free_threading_arguments(parser)
    parser.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="EXPR",
        help="exit 10 when EXPR holds, e.g. 'waiting_gil>0.2', 'thread=worker-*:wait>=30%%', 'gil_utilisation>0.9' (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    options = record_options(args)
    output, pictures = options.output, picture_options(options.output)
    # Signals are caught from the start (a SIGTERM while CMD starts still stops CMD) to the end of the
    # write (a second Ctrl-C does not lose the report).
    with capture.Stop() as stop:
        result = record_run.run(options, stop)
        reports.write(result.recording, output.format, output.path, pictures)
    return result.status


# the program's parse step (gilty.cli.parse_options) asks each command for its options by this name
build_options = record_options
