"""Compare two load runs or two recordings, and say which differences are beyond run-to-run noise.

  gilty load URL --ramp 50:500:50 --slo p99=50ms -o before.json -- gunicorn app:app
  gilty load URL --ramp 50:500:50 --slo p99=50ms -o after.json  -- gunicorn app:app
  gilty compare before.json after.json

A and B are both JSON reports of `gilty load`, or both of `gilty record`. Load runs are compared
per step (matched by rate: throughput, p50/p90/p99, errors), per URL (matched by path) and per
endpoint; recordings per role and thread name (state shares), per function (self time, idle left
out) and overall (GIL utilisation). Noise is estimated from each run's own seconds (docs/load.md,
"Comparing runs"). Two recordings also give a differential flame graph: `-o diff.svg` or
`-o diff.html`.
"""

from __future__ import annotations

import argparse

from gilty import report
from gilty._errors import EXIT_OK
from gilty.cli.options import add_format_argument, check_output, output_format, read_json_file
from gilty.load import two_runs
from gilty.options import CompareOptions, OutputOptions


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A.json", help="the first run (the baseline)")
    parser.add_argument("b", metavar="B.json", help="the second run")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the comparison to FILE instead of stdout")
    add_format_argument(parser, ("text", "json", "svg", "html"))


def run(args: argparse.Namespace) -> int:
    options = CompareOptions(args.a, args.b, OutputOptions(_format(args.format, args.output), args.output))
    comparison = two_runs.run(options, read_json_file)
    report.write(comparison, options.output.format, options.output.path)
    return EXIT_OK


def _format(fmt, path) -> str:
    """text, json, or for two recordings the differential flame graph: svg, html (from -o's extension)."""
    check_output(path)  # before reading: a bad -o costs nothing
    if fmt:
        return fmt
    lower = (path or "").lower()
    for ext, name in ((".svg", "svg"), (".html", "html"), (".htm", "html")):
        if lower.endswith(ext):
            return name
    return output_format(None, path)
