"""Load a web service with open-loop arrivals and measure latency as its users would see it.

  gilty load http://127.0.0.1:8000/ --rate 100 --duration 10
  gilty load http://127.0.0.1:8000/ --ramp 50:1000:50 --slo p99=50ms
  gilty load http://127.0.0.1:8000/ --ramp 50:500:50 --slo p99=50ms --profile MASTER_PID
  gilty load http://127.0.0.1:8000/ --ramp 50:500:50 -- gunicorn -w 4 app:app
  gilty load http://127.0.0.1:8000 --locustfile locustfile.py --users 50 --workers 2 -- gunicorn app:app

Requests start on a fixed schedule (constant or Poisson arrivals) whether or not earlier ones have
returned; latency counts from each request's intended start, so a server stall is charged to every
request it delayed. With --ramp, the rate steps up until a step misses the SLO (p99 at most the
limit and at most 1 % errors), and the knee is the highest rate that met it.

With --profile PID (the server's master; its Python descendants are followed) or a server command
after `--` (started, waited for until the URL answers, stopped at the end), every step also samples
the server on the same clock: what its workers did, where, and at the knee the limit in plain words.

The report option may also end the server command, as in
  gilty load URL --ramp 50:1000:50 --slo p99=50ms -- gunicorn app:app -o run.html
a trailing -o/--output FILE after the server command is gilty's (said on stderr), unless gilty's own
-o came before `--`; then the server gets it.

With --locustfile, Locust runs headless (a master and --workers local workers) instead of gilty's
generator; its closed-loop figures are labelled as such and joined per second with the profile.
"""

from __future__ import annotations

import argparse
import os
import sys

from gilty import report as reports
from gilty._errors import UsageError
from gilty.cli.options import (
    add_format_argument,
    bounded_float,
    bounded_int,
    check_output,
    output_format,
    pid_number,
    positive_int,
    seconds,
)
from gilty.load import run as load
from gilty.load.locust import LocustOptions
from gilty.load.options import DEFAULT_DURATION_S, DEFAULT_STEP_S, SERVER_WARMUP_S, LoadOptions, ServerOptions, trailing_output
from gilty.load.plan import MAX_RATE, GeneratorOptions, parse_header, parse_ramp, parse_slo, parse_url
from gilty.load.result import LoadRun
from gilty.load.sites import AppScope
from gilty.options import OutputOptions
from gilty.report.load import text as load_report
from gilty.sampling import capture

ACCEPTS_CHILD_COMMAND = True
# More would only exhaust file descriptors or CPUs before sending anything useful.
MAX_CONNECTIONS = 100_000
MAX_THREADS = 256


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "gilty load URL[@WEIGHT] [URL ...] (--rate RPS | --ramp FROM:TO:STEP) [--duration S] [--slo p99=50ms] [options]\n"
        "       gilty load [URL] --locustfile F [--users N] [--spawn-rate R] [--workers K] [--duration S] [options]"
    )
    parser.add_argument(
        "urls", nargs="*", metavar="URL", help="http:// URL to load; URL@WEIGHT to weight several (with --locustfile: the host)"
    )
    parser.add_argument("--rate", type=bounded_float(0.0, MAX_RATE), metavar="RPS", help="requests started per second")
    parser.add_argument(
        "--ramp", metavar="FROM:TO:STEP", help="step the rate up, stopping after the first step that misses the SLO"
    )
    parser.add_argument(
        "--duration",
        type=seconds,
        metavar="S",
        help=f"seconds per run or per ramp step (default {DEFAULT_DURATION_S:g} / {DEFAULT_STEP_S:g})",
    )
    parser.add_argument(
        "--slo", metavar="pXX=LIMIT", help="latency objective for --ramp, e.g. p99=50ms (errors must stay <= 1%%)"
    )
    parser.add_argument(
        "--arrivals", choices=("constant", "poisson"), default="constant", help="arrival process (default: constant)"
    )
    parser.add_argument("--seed", type=bounded_int(0, 2**64 - 1), default=1, help="seed of the Poisson arrivals (default 1)")
    parser.add_argument(
        "--max-in-flight",
        type=positive_int,
        default=1000,
        metavar="N",
        help="arrivals beyond N requests in flight are dropped and counted (default 1000)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=10.0,
        metavar="S",
        help="a request without a full answer after S seconds is a timeout (default 10)",
    )
    parser.add_argument(
        "--connections",
        type=bounded_int(1, MAX_CONNECTIONS),
        default=64,
        metavar="N",
        help="keep-alive connections per host, at most (default 64); an arrival waits for a free one",
    )
    parser.add_argument(
        "--threads", type=bounded_int(1, MAX_THREADS), default=1, metavar="N", help="generator threads (default 1)"
    )
    parser.add_argument("-X", "--method", default="GET", help="HTTP method (default GET)")
    parser.add_argument(
        "-H", "--header", action="append", default=[], metavar="'NAME: VALUE'", help="a request header (repeatable)"
    )
    parser.add_argument("--body", help="request body (text)")
    parser.add_argument(
        "--profile",
        type=pid_number,
        metavar="PID",
        help="sample this server process and its Python descendants during every step",
    )
    parser.add_argument(
        "--warmup",
        type=seconds,
        metavar="S",
        help=f"first load the server at the first rate for S seconds, unmeasured (lazy imports, caches, connections; default {SERVER_WARMUP_S:g} for a server gilty starts, else 0)",
    )
    parser.add_argument(
        "--app",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="with a profile: this package (or module) is the application's code wherever it is installed, e.g. site-packages (repeatable)",
    )
    parser.add_argument(
        "--tasks",
        action="store_true",
        help="with a profile: also read every asyncio task in each pass, and split each endpoint's requests' time into running, waiting for the GIL and awaiting (what, at which line)",
    )
    parser.add_argument(
        "--loop-lag",
        type=bounded_float(0.0, 60_000.0),
        default=20.0,
        metavar="MS",
        help="with a profile: report asyncio loop spans away from the selector longer than MS (default 20)",
    )
    parser.add_argument(
        "--locustfile", metavar="F", help="run Locust headless with this locustfile instead (closed loop; see docs/load.md)"
    )
    parser.add_argument(
        "--users",
        type=bounded_int(1, MAX_CONNECTIONS),
        default=10,
        metavar="N",
        help="with --locustfile: Locust users (default 10)",
    )
    parser.add_argument(
        "--spawn-rate",
        type=bounded_float(0.0, MAX_RATE),
        default=10.0,
        metavar="R",
        help="with --locustfile: users started per second (default 10)",
    )
    parser.add_argument(
        "--workers",
        type=bounded_int(1, MAX_THREADS),
        default=1,
        metavar="K",
        help="with --locustfile: local Locust worker processes (default 1)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout (may also end the server command)"
    )
    add_format_argument(parser, ("text", "json", "html"))


def run(args: argparse.Namespace) -> int:
    options = load_options(args)
    with capture.Stop() as stop:
        result = load.run(options, stop)
    reports.write(result, options.output.format, options.output.path)
    if options.output.path is not None and isinstance(result, LoadRun) and result.knee is not None:
        print(f"gilty: {load_report.knee_line(result)}", file=sys.stderr)  # the answer, not only a file name
    return load.exit_status(result)


def load_options(args: argparse.Namespace) -> LoadOptions:
    """The run's options from its command line, checked in the order a user reads the errors."""
    output, command = trailing_output(args.output, args.child_argv)
    fmt = output_format(args.format, output, ("text", "json", "html"))
    check_output(output)
    if args.locustfile is not None:
        return _locust_options(args, command, fmt, output)
    if not args.urls:
        raise UsageError("give the URL to load (see `gilty load --help`)")
    if (args.rate is None) == (args.ramp is None):
        raise UsageError("give either --rate RPS or --ramp FROM:TO:STEP (see `gilty load --help`)")
    slo = parse_slo(args.slo)
    app = _app(args.app)
    rates = (args.rate,) if args.rate is not None else tuple(parse_ramp(args.ramp))
    generator = GeneratorOptions(
        urls=[parse_url(u) for u in args.urls],
        method=args.method.upper(),
        headers=[parse_header(h) for h in args.header],
        body=(args.body or "").encode(),
        arrivals=args.arrivals,
        seed=args.seed,
        max_in_flight=args.max_in_flight,
        timeout_s=args.timeout,
        connections=args.connections,
        threads=args.threads,
    )
    return LoadOptions(
        server=_server(args, command, app),
        duration_s=args.duration or (DEFAULT_DURATION_S if args.rate is not None else DEFAULT_STEP_S),
        generator=generator,
        rates=rates,
        ramp=args.ramp is not None,
        slo=slo,
        output=OutputOptions(fmt, output),
    )


def _locust_options(args: argparse.Namespace, command, fmt: str, output) -> LoadOptions:
    if args.rate is not None or args.ramp is not None:
        raise UsageError("--locustfile runs Locust's own users (a closed loop): give --users, not --rate or --ramp")
    if not os.path.isfile(args.locustfile):
        raise UsageError(f"{args.locustfile}: no such locustfile")
    if len(args.urls) > 1:
        raise UsageError("with --locustfile give at most one URL: the host Locust's users call")
    if command is not None and args.profile is not None:
        raise UsageError("give either --profile PID or a server command after --, not both")
    if command is not None and not args.urls:
        raise UsageError("with a server command, give the URL it serves (Locust's host)")
    # Locust joins the host and each task's path: "http://h:p/" + "/" would ask for "//".
    host = parse_url(args.urls[0])[0].rstrip("/") if args.urls else None
    app = _app(args.app)
    duration = args.duration or DEFAULT_DURATION_S
    return LoadOptions(
        server=_server(args, command, app),
        duration_s=duration,
        locust=LocustOptions(args.locustfile, args.users, args.spawn_rate, args.workers, duration, host),
        output=OutputOptions(fmt, output),
    )


def _server(args: argparse.Namespace, command, app: AppScope) -> ServerOptions:
    if command is not None and args.profile is not None:
        raise UsageError("give either --profile PID or a server command after --, not both")
    return ServerOptions(args.profile, command, args.warmup, app, args.tasks, args.loop_lag / 1e3)


def _app(names: list) -> AppScope:
    """``--app`` names as path fragments; a name that is no package or module name is one line."""
    for name in names:
        if not name or not all(part.isidentifier() for part in name.split(".")):
            raise UsageError(f"--app {name!r}: expected a package or module name, e.g. httpbin or shop.views")
    return AppScope.of_packages(names)


# the program's parse step (gilty.cli.parse_options) asks each command for its options by this name
build_options = load_options
