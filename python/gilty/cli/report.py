"""Write a saved report in another format, without recording again.

  gilty record --pid 4242 --duration 10 -o rec.json
  gilty report rec.json -o rec.html
  gilty report rec.json --format collapsed | flamegraph.pl > rec.svg
  gilty report load.json -o load.html          # also `gilty load`, `gilty specialization`, `gilty compare` JSON

FILE is a JSON report of `gilty record` (its "recording" key) or a saved Recording, or the JSON
report of `gilty load`, `gilty specialization` or `gilty compare`. The output format comes from
--format, else from -o's extension (.html .svg .speedscope.json .trace.json .collapsed .folded
.json .txt), else text; a load, specialization or compare report is text, JSON or HTML.
"""

from __future__ import annotations

import argparse

from gilty import report as reports
from gilty._errors import EXIT_OK, EXIT_USAGE, CommandError
from gilty.cli.options import add_picture_arguments, check_output, picture_options, read_json_file
from gilty.sampling.session import Recording, compact_runs


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a JSON report written by `gilty record -o FILE.json`")
    parser.add_argument("-o", "--output", metavar="OUT", help="write to OUT instead of stdout")
    parser.add_argument(
        "--format",
        choices=reports.FORMAT_NAMES,
        default=None,
        help="output format (default: from OUT's extension, else text)",
    )
    add_picture_arguments(parser)


_JSON_TYPES = ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string"), ((int, float), "number"))


def _json_type(value) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "null")


def _missing(data) -> str:
    """What the file lacks, said as it is: `{"recording": {}}` has the key, not what goes in it."""
    if not isinstance(data, dict):
        return f"it is a JSON {_json_type(data)}, not an object"
    if "recording" not in data:
        return 'no "recording" key'
    if not isinstance(data["recording"], dict):
        return f'its "recording" is a JSON {_json_type(data["recording"])}, not an object'
    return 'its "recording" has no "recording_format_version"'


def load_recording(path: str, data=None) -> Recording:
    """The Recording saved in ``path`` (``data``: its JSON, when already read); a file that holds
    none is one line, exit 2."""
    if data is None:
        data = read_json_file(path, "; give a report written by `gilty record -o FILE.json`", compact_runs)
    raw = data.get("recording", data) if isinstance(data, dict) else None
    if not isinstance(raw, dict) or "recording_format_version" not in raw:
        raise CommandError(
            f"{path} holds no gilty recording ({_missing(data)}); give a report written by `gilty record -o FILE.json`",
            EXIT_USAGE,
        )
    try:
        return Recording.from_dict(raw)
    except ValueError as e:
        raise CommandError(f"{path}: {e}", EXIT_USAGE) from None
    except KeyError as e:  # the field a recording needs, by name
        raise CommandError(f"{path}: the recording in it is damaged: it has no {e.args[0]!r} field", EXIT_USAGE) from None
    except (TypeError, AttributeError, OverflowError, IndexError, RecursionError) as e:
        raise CommandError(f"{path}: the recording in it is damaged ({type(e).__name__}: {e})", EXIT_USAGE) from None


def run(args: argparse.Namespace) -> int:
    fmt = reports.output_format(args.format, args.output)  # before reading: a bad -o costs nothing
    check_output(args.output)
    data = read_json_file(args.file, "; give a report written by `gilty record -o FILE.json`", compact_runs)
    kind = _other_kind(data)
    if kind is not None:
        from gilty.report import saved

        try:
            text = saved.render(kind, data, fmt)
        except saved.NotThisFormat as e:
            raise CommandError(f"{args.file}: {e}", EXIT_USAGE) from None
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CommandError(f"{args.file}: the {kind} report in it is damaged ({type(e).__name__}: {e})", EXIT_USAGE) from None
        reports.emit(text, args.output)
        return EXIT_OK
    # The JSON read above, not a second copy: a long recording's JSON is larger than its Recording.
    recording = load_recording(args.file, data)
    del data
    if not recording.sessions:
        raise CommandError(f"{args.file} holds a recording of no process", EXIT_USAGE)
    try:
        text = reports.render(recording, fmt, picture_options(args))
    except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as e:
        # The checks on loading cannot foresee every inconsistency of a hand-edited file; what a
        # recorder wrote renders, so a failure here is the file's, said as one line.
        raise CommandError(
            f"{args.file}: the recording cannot be drawn, it is damaged ({type(e).__name__}: {e})", EXIT_USAGE
        ) from None
    reports.emit(text, args.output)
    return EXIT_OK


def _other_kind(data) -> "str | None":
    """ "load", "specialization" or "compare" for those commands' JSON reports; None otherwise."""
    if not isinstance(data, dict):
        return None
    if data.get("kind") == "load" and isinstance(data.get("steps"), list):
        return "load"
    if data.get("kind") == "compare" and isinstance(data.get("rows"), list):
        return "compare"
    if str(data.get("schema", "")).startswith("gilty.specialization.report/") and isinstance(data.get("session"), dict):
        return "specialization"
    if str(data.get("schema", "")).startswith("gilty.specialization.opcache/") and isinstance(data.get("codes"), list):
        return "opcache"  # Python 3.10's opcache report
    return None
