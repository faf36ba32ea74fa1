"""The argparse side of the commands' options: argument helpers the commands share, and the typed
options (gilty.options) built once from what argparse parsed. Light on purpose: `gilty dump` imports
this and little else, so that it starts quickly."""

from __future__ import annotations

import argparse
import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Optional

from gilty._errors import CommandError, UsageError

FORMATS = ("text", "json")
DEFAULT_RATE_HZ = 100.0  # of record and top

# Upper bounds of numbers on the command line: past them a value is a typo, and taking it would
# overflow a Duration (a panic), build a huge list, or start more threads than the machine has.
MAX_SECONDS = 1e7  # about 116 days: any duration, timeout or interval
MAX_SAMPLING_HZ = 20_000.0  # the native samplers' own limit
MIN_SAMPLING_HZ = 0.1  # one pass every 10 s, as docs/cli.md says (top and record stop promptly at it)
MAX_COUNT = 10_000_000  # any count (connections, in-flight requests, users, sites listed)
MAX_PID = 2**22  # the kernel's pid_max ceiling
MAX_REPORT_BYTES = 4 << 30  # a saved report read by `gilty report` and `gilty compare`


def _number(text: str, kind: type):
    try:
        return kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def bounded_int(low: int, high: int):
    """An argparse type: a whole number in [low, high]."""

    def parse(text: str) -> int:
        value = _number(text, int)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} must be between {low} and {high}")
        return value

    parse.__name__ = "whole number"
    return parse


def bounded_float(low: float, high: float, low_included: bool = False):
    """An argparse type: a finite number above ``low`` (or at it) and at most ``high``; NaN and inf refused."""

    def parse(text: str) -> float:
        value = _number(text, float)
        above = value >= low if low_included else value > low
        if not (above and value <= high):  # false for NaN too
            bound = "at least" if low_included else "greater than"
            raise argparse.ArgumentTypeError(f"{text!r} must be a finite number {bound} {low:g} and at most {high:g}")
        return value

    parse.__name__ = "number"
    return parse


def positive_int(text: str) -> int:
    value = _number(text, int)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most {MAX_COUNT})")
    return value


def positive_float(text: str) -> float:
    value = _number(text, float)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number greater than 0")
    return value


# The bounded types the commands share.
seconds = bounded_float(0.0, MAX_SECONDS)
sampling_rate = bounded_float(MIN_SAMPLING_HZ, MAX_SAMPLING_HZ, low_included=True)
pid_number = bounded_int(1, MAX_PID)
port_number = bounded_int(1, 65535)


def add_format_argument(parser: argparse.ArgumentParser, choices: tuple = FORMATS) -> None:
    parser.add_argument(
        "--format",
        choices=choices,
        default=None,
        help="output format (default: from -o's extension, else text)",
    )


# File extensions of the formats the commands other than record and report write.
_EXTENSIONS = ((".json", "json"), (".html", "html"), (".htm", "html"), (".txt", "text"))


def output_format(fmt: Optional[str], path: Optional[str], choices: tuple = FORMATS) -> str:
    """The explicit --format, else chosen by the output file's extension (pyinstrument's habit), else
    text. An extension that names none of ``choices`` (``-o x.svg`` of a text report) is refused
    before any work, as `gilty record` refuses it."""
    if fmt:
        return fmt
    if not path:
        return "text"
    lower = path.lower()
    found = next((f for ext, f in _EXTENSIONS if lower.endswith(ext) and f in choices), None)
    if found is None:
        known = " ".join(ext for ext, f in _EXTENSIONS if f in choices)
        raise UsageError(f"cannot tell the format of {path!r} from its extension ({known}); add --format FORMAT")
    return found


def check_output(path: Optional[str]) -> None:
    """Before attaching or reading: an -o that could not be written (no directory, a symlink another
    user planted, report/output_file.py) is one line, exit 2, not a recording lost at the end."""
    from gilty.report import output_file

    output_file.check(path)


def add_pid_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """``--pid`` (repeatable) and ``--subprocesses``, shared by record, top and dump."""
    parser.add_argument(
        "--pid",
        type=pid_number,
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


def read_json_file(path: str, hint: str = "", object_hook=None):
    """The JSON document in ``path`` (``object_hook`` as json.load's); an unreadable or non-JSON
    file is one line, exit 2."""
    import json
    import stat

    from gilty._errors import EXIT_USAGE

    try:
        # Non-blocking, and only a regular file is read: a FIFO would wait for a writer forever (and
        # the wait ignores Ctrl-C), a device (/dev/zero, a terminal) never ends.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb", buffering=0) as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise CommandError(f"{path} is not a regular file (a FIFO, device or socket is not read)", EXIT_USAGE)
            # st_size first (one buffer for a report), then on to the end: /proc files say 0.
            chunks, size = [], 0
            while size <= MAX_REPORT_BYTES:
                chunk = f.read(min(st.st_size, MAX_REPORT_BYTES) + 1 if not chunks else 1 << 20)
                if not chunk:  # the end, or None: nothing to give yet (a /proc file), read as empty
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > MAX_REPORT_BYTES:
                raise CommandError(f"{path} is larger than {MAX_REPORT_BYTES >> 30} GB, more than a gilty report", EXIT_USAGE)
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            del chunks
            return json.loads(data.decode("utf-8"), object_hook=object_hook)
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}", EXIT_USAGE) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CommandError(f"{path} is not JSON ({e}){hint}", EXIT_USAGE) from None
    except RecursionError:
        raise CommandError(f"{path} is nested too deeply to be a gilty report{hint}", EXIT_USAGE) from None


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
    parser.add_argument(
        "--source-functions",
        type=source_functions,
        default=DEFAULT_SOURCE_FUNCTIONS,
        metavar="N",
        help="in the HTML report, show the lines of the N functions with the most self time "
        "(default: %(default)s; 0: no source view; docs/source-view.md)",
    )


# The HTML report's source view (gilty.sampling.analysis.lines: DEFAULT_FUNCTIONS, MAX_FUNCTIONS).
DEFAULT_SOURCE_FUNCTIONS = 15
MAX_SOURCE_FUNCTIONS = 100


def source_functions(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= MAX_SOURCE_FUNCTIONS:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_SOURCE_FUNCTIONS}: {value}")
    return value


def picture_options(source):
    """What pictures draw, from a namespace with ``add_picture_arguments``'s options or an
    OutputOptions (gilty.options)."""
    from gilty.report.pictures import PictureOptions

    return PictureOptions(
        idle=bool(source.idle),
        merge_workers=source.merge_workers,
        lines=bool(source.lines),
        source_functions=getattr(source, "source_functions", DEFAULT_SOURCE_FUNCTIONS),
    )


# -- the shared option groups (gilty.options): their arguments, and the dataclasses built from them --


def add_rate_argument(parser: argparse.ArgumentParser, default: float) -> None:
    parser.add_argument(
        "--rate", type=sampling_rate, default=default, metavar="HZ", help="samples per second (default: %(default)g)"
    )


def add_duration_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=seconds, metavar="S", help="stop after S seconds (default: until Ctrl-C or exit)")


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")


def add_exact_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--exact",
        action="store_true",
        help="also trace every GIL acquisition and garbage collection with uprobes (root; needs interpreter symbols)",
    )


def add_tasks_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tasks",
        action="store_true",
        help="also read every asyncio task in each pass: wall time per task, by await site (docs/asyncio.md)",
    )


def add_free_threading_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--free-threading",
        action="store_true",
        help="also say whether a free-threaded build (3.14t) would run it faster, and which extension modules "
        "would turn the GIL back on (docs/free-threading.md)",
    )
    parser.add_argument(
        "--ft-slowdown",
        metavar="PCT",
        help="the free-threaded build's single-thread slowdown to assume, e.g. 10%% (the default; implies --free-threading)",
    )


def add_native_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--native",
        action="store_true",
        help="also sample each thread's C stack with perf events and show it between the Python frames "
        "(docs/cli.md; root, CAP_PERFMON or kernel.perf_event_paranoid<=1)",
    )


def target_options(args: argparse.Namespace):
    """--pid, -s and `-- CMD` (``args.child_argv``, set by gilty.cli.main for every command)."""
    from gilty.options import TargetOptions

    return TargetOptions(tuple(args.pid or ()), bool(args.subprocesses), args.child_argv)


def sampling_options(args: argparse.Namespace, **given):
    """--rate and --duration of ``args``; the rest (native, exact, tasks) as ``given``, from the options
    the command has."""
    from gilty.options import SamplingOptions

    return SamplingOptions(args.rate, args.duration, **given)


def output_options(args: argparse.Namespace, fmt: str, pictures: bool = False):
    """-o and the chosen format; with ``pictures``, --idle, --merge-workers and --no-lines too."""
    from gilty.options import OutputOptions

    if not pictures:
        return OutputOptions(fmt, args.output)
    return OutputOptions(fmt, args.output, bool(args.idle), args.merge_workers, bool(args.lines), args.source_functions)


def record_options(args: argparse.Namespace):
    """`gilty record`'s options; what the command line got wrong is one line, exit 2, before anything
    is attached or started (in this order: the target, -o, --fail-if, what -s rules out)."""
    from gilty import report as reports
    from gilty.options import RecordOptions
    from gilty.sampling.analysis.gates import parse_gate

    target = target_options(args)
    if bool(target.pids) == (target.command is not None):
        raise UsageError("give either --pid PID or -- CMD [ARG ...] (see `gilty record --help`)")
    fmt = reports.output_format(args.format, args.output)  # a bad -o fails before recording
    check_output(args.output)
    gates = tuple(parse_gate(text) for text in args.fail_if)  # a bad gate too
    if target.several:
        if args.tasks:
            raise UsageError("--tasks reads one process's event loops: leave out --subprocesses and give one --pid")
        if args.exact:
            raise UsageError("--exact traces one process: leave out --subprocesses and give one --pid")
    free_threading = None
    if args.ft_slowdown is not None or args.free_threading:
        from gilty.readiness.analysis import DEFAULT_SLOWDOWN, parse_slowdown

        free_threading = DEFAULT_SLOWDOWN if args.ft_slowdown is None else parse_slowdown(args.ft_slowdown)
    return RecordOptions(
        target,
        sampling_options(args, native=bool(args.native), exact=bool(args.exact), tasks=bool(args.tasks)),
        output_options(args, fmt, pictures=True),
        gates,
        free_threading,
    )


def top_options(args: argparse.Namespace):
    from gilty.options import TopOptions

    target = target_options(args)
    if args.exact and target.several:
        raise UsageError("--exact traces one process: leave out --subprocesses and give one --pid")
    return TopOptions(target, sampling_options(args, exact=bool(args.exact)), args.sort)


def serve_options(args: argparse.Namespace):
    from gilty.options import SamplingOptions, ServeOptions

    # No --duration: it serves until stopped.
    return ServeOptions(target_options(args), SamplingOptions(args.rate), args.bind, args.port, bool(args.per_thread))
