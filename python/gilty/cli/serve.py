"""Serve Prometheus metrics of a running process tree, sampled from outside: no code change.

  gilty serve --pid MASTER --subprocesses                  # http://127.0.0.1:9464/metrics
  gilty serve --pid 4242 --rate 20 --bind 0.0.0.0 --port 9500

Samples the process (and with -s its Python descendants: workers replaced after --max-requests are
picked up) at a low rate for as long as it runs, and serves GIL hold / wait seconds and every state's
seconds per thread name (pools of numbered threads folded; --per-thread: per thread id), labelled with
the process's role and short name, and per process its GIL utilisation, GC time and memory. When the process itself exits, gilty waits for a process with the same command
line (a restart), re-attaches, and says so in one line. Stops on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse

from gilty.cli.options import add_pid_arguments, add_rate_argument, port_number, serve_options
from gilty.sampling import capture, serve_run

DEFAULT_RATE_HZ = 10.0
DEFAULT_PORT = 9464


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = "gilty serve --pid PID [--pid PID ...] [-s] [--rate HZ] [--bind ADDR] [--port PORT] [--per-thread]"
    add_pid_arguments(parser, required=True)
    add_rate_argument(parser, DEFAULT_RATE_HZ)
    parser.add_argument(
        "--bind",
        type=listen_address,
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default: loopback only; 0.0.0.0 or :: for every interface)",
    )
    parser.add_argument("--port", type=port_number, default=DEFAULT_PORT, help="port of /metrics (default: %(default)d)")
    parser.add_argument(
        "--per-thread",
        action="store_true",
        help="one series per thread id (label tid) instead of one per thread name with numbered pools folded",
    )


def run(args: argparse.Namespace) -> int:
    options = serve_options(args)
    with capture.Stop() as stop:
        return serve_run.run(options, stop)


def listen_address(text: str) -> str:
    """--bind's value: an empty one makes a server listen on every interface, which is not to happen
    unasked."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty address would listen on every interface: give 0.0.0.0 (or ::) to mean that")
    return text.strip()


# the program's parse step (gilty.cli.parse_options) asks each command for its options by this name
build_options = serve_options
