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
from gilty._errors import EXIT_OK, EXIT_USAGE, CommandError
from gilty.cli.options import add_format_argument, check_output, output_format, read_json_file
from gilty.load import run_diff
from gilty.load.comparison import Comparison
from gilty.sampling.session import Recording


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A.json", help="the first run (the baseline)")
    parser.add_argument("b", metavar="B.json", help="the second run")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the comparison to FILE instead of stdout")
    add_format_argument(parser, ("text", "json", "svg", "html"))


def _read(path: str) -> tuple:
    """(kind, data): ("load", the load report) or ("recording", Recording)."""
    data = read_json_file(path)
    if isinstance(data, dict) and data.get("kind") == "load" and isinstance(data.get("steps"), list):
        return "load", data
    raw = data.get("recording") if isinstance(data, dict) else None
    if isinstance(raw, dict) and "recording_format_version" in raw:
        try:
            return "recording", Recording.from_dict(raw)
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, IndexError, RecursionError) as e:
            raise CommandError(f"{path}: the recording in it is damaged ({type(e).__name__}: {e})", EXIT_USAGE) from None
    raise CommandError(f"{path} is neither a `gilty load` nor a `gilty record` JSON report", EXIT_USAGE)


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


def run(args: argparse.Namespace) -> int:
    fmt = _format(args.format, args.output)
    kind_a, a = _read(args.a)
    kind_b, b = _read(args.b)
    if kind_a != kind_b:
        raise CommandError(f"cannot compare a {kind_a} report ({args.a}) with a {kind_b} report ({args.b})", EXIT_USAGE)
    try:
        rows = run_diff.compare_load(a, b) if kind_a == "load" else run_diff.compare_recordings(a, b)
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError) as e:
        raise CommandError(f"a report lacks a field the comparison needs ({type(e).__name__}: {e})", EXIT_USAGE) from None
    if not rows:
        raise CommandError(
            f"{args.a} and {args.b} have nothing in common to compare (no step at the same rate, no thread of the same name)",
            EXIT_USAGE,
        )
    drawn = (a, b) if kind_a == "recording" else (None, None)
    report.write(Comparison(args.a, args.b, kind_a, rows, *drawn), fmt, args.output)
    return EXIT_OK
