"""Argument helpers and output shared by the commands. Light on purpose: `gilty dump` imports this
and little else, so that it starts quickly."""

from __future__ import annotations

import argparse
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Optional

from gilty._errors import CommandError
from gilty.report import emit  # noqa: F401 - the commands' one way to write output

FORMATS = ("text", "json")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number greater than 0")
    return value


def add_format_argument(parser: argparse.ArgumentParser, choices: tuple = FORMATS) -> None:
    parser.add_argument(
        "--format",
        choices=choices,
        default=None,
        help="output format (default: from -o's extension, else text)",
    )


def output_format(fmt: Optional[str], path: Optional[str]) -> str:
    """The explicit --format, else chosen by the output file's extension (pyinstrument's habit)."""
    if fmt:
        return fmt
    if path and path.lower().endswith(".json"):
        return "json"
    return "text"


def add_pid_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """``--pid`` (repeatable) and ``--subprocesses``, shared by record, top and dump."""
    parser.add_argument(
        "--pid",
        type=positive_int,
        action="append",
        required=required,
        help="attach to this running process; give it several times for several processes",
    )
    parser.add_argument(
        "-s",
        "--subprocesses",
        action="store_true",
        help="also every Python descendant of the process(es), including ones started later",
    )


def read_json_file(path: str, hint: str = ""):
    """The JSON document in ``path``; an unreadable or non-JSON file is one line, exit 2."""
    import json

    from gilty._errors import EXIT_USAGE

    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}", EXIT_USAGE) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CommandError(f"{path} is not JSON ({e}){hint}", EXIT_USAGE) from None


def add_picture_arguments(parser: argparse.ArgumentParser) -> None:
    """``--idle`` and ``--merge-workers``: what the flame graphs, speedscope and collapsed stacks draw."""
    parser.add_argument(
        "--idle",
        action="store_true",
        help="draw idle samples too in flame graphs, speedscope and collapsed stacks (left out by default)",
    )
    parser.add_argument(
        "--merge-workers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draw a master's identical workers as one process, their threads merged by name "
        "(default: on when the recording holds workers)",
    )
    parser.add_argument(
        "--no-lines",
        dest="lines",
        action="store_false",
        help="in flame graphs and collapsed stacks, name frames `function (file.py)` without the line",
    )


def picture_options(args: argparse.Namespace):
    from gilty.report.pictures import PictureOptions

    return PictureOptions(
        idle=bool(getattr(args, "idle", False)),
        merge_workers=getattr(args, "merge_workers", None),
        lines=bool(getattr(args, "lines", True)),
    )
