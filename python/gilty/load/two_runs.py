"""`gilty compare`: two saved JSON reports, both of `gilty load` or both of `gilty record`, read and
their differences found (load.run_diff), for the report layer to write as a ``Comparison``."""

from __future__ import annotations

from typing import Callable

from gilty._errors import EXIT_USAGE, CommandError
from gilty.load import run_diff
from gilty.load.comparison import Comparison
from gilty.options import CompareOptions
from gilty.sampling.session import Recording


def run(options: CompareOptions, read_json: Callable[[str], object]) -> Comparison:
    """``read_json(path)``: the document in a file, or one line and exit 2 when it is unreadable or
    not JSON (the command line's reader)."""
    kind_a, a = _read(options.a, read_json)
    kind_b, b = _read(options.b, read_json)
    if kind_a != kind_b:
        raise CommandError(f"cannot compare a {kind_a} report ({options.a}) with a {kind_b} report ({options.b})", EXIT_USAGE)
    try:
        rows = run_diff.compare_load(a, b) if kind_a == "load" else run_diff.compare_recordings(a, b)
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError) as e:
        raise CommandError(f"a report lacks a field the comparison needs ({type(e).__name__}: {e})", EXIT_USAGE) from None
    if not rows:
        raise CommandError(
            f"{options.a} and {options.b} have nothing in common to compare (no step at the same rate, no thread of the same name)",
            EXIT_USAGE,
        )
    drawn = (a, b) if kind_a == "recording" else (None, None)
    return Comparison(options.a, options.b, kind_a, rows, *drawn)


def _read(path: str, read_json: Callable[[str], object]) -> tuple:
    """(kind, data): ("load", the load report) or ("recording", Recording)."""
    data = read_json(path)
    if isinstance(data, dict) and data.get("kind") == "load" and isinstance(data.get("steps"), list):
        return "load", data
    raw = data.get("recording") if isinstance(data, dict) else None
    if isinstance(raw, dict) and "recording_format_version" in raw:
        try:
            return "recording", Recording.from_dict(raw)
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, IndexError, RecursionError) as e:
            raise CommandError(f"{path}: the recording in it is damaged ({type(e).__name__}: {e})", EXIT_USAGE) from None
    raise CommandError(f"{path} is neither a `gilty load` nor a `gilty record` JSON report", EXIT_USAGE)
