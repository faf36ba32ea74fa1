"""Sample a Python process and report who holds the GIL, who waits for it, and why.

Attach to a running process with --pid, or start one after `--`:

  gilty record --pid 4242 --duration 10
  gilty record --format json -o report.json -- python app.py

Sampling runs until --duration ends, the target exits, or Ctrl-C (the summary is still
printed). The command's own output goes to gilty's stderr. On a terminal, one line on stderr shows
the recording's progress (cli/progress.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Optional

from gilty import launch
from gilty._errors import EXIT_EXACT_UNAVAILABLE, EXIT_OK, EXIT_PARTIAL, EXIT_TARGET_EXITED, CommandError, UsageError
from gilty.cli.progress import Progress
from gilty.renderers import console, json_report
from gilty.session import Session, TargetInfo

ACCEPTS_CHILD_COMMAND = True
DEFAULT_RATE_HZ = 100.0
# Each collect() call samples this long with the GIL released; Ctrl-C is seen between calls.
CHUNK_S = 0.25
FORMATS = ("text", "json")


# -- argument helpers shared by the commands -------------------------------------------------


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


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="output format (default: json when -o ends in .json, else text)",
    )


def output_format(fmt: Optional[str], path: Optional[str]) -> str:
    """The explicit --format, else chosen by the output file's extension (pyinstrument's habit)."""
    if fmt:
        return fmt
    if path and path.lower().endswith(".json"):
        return "json"
    return "text"


def emit(text: str, path: Optional[str]) -> None:
    """Print to stdout, or write ``path`` and say so on stderr."""
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise CommandError(f"cannot write {path}: {e.strerror or e}") from None
    print(f"gilty: wrote {path}", file=sys.stderr)


# -- the command ------------------------------------------------------------------------------


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "gilty record (--pid PID | -- CMD [ARG ...]) [--duration S] [--rate HZ] [--exact] [-o FILE] [--format {text,json}]"
    )
    parser.add_argument("--pid", type=positive_int, help="attach to this running process")
    parser.add_argument(
        "--duration", type=positive_float, metavar="S", help="stop after S seconds (default: until Ctrl-C or exit)"
    )
    parser.add_argument(
        "--rate",
        type=positive_float,
        default=DEFAULT_RATE_HZ,
        metavar="HZ",
        help="samples per second (default: %(default)g)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    add_format_argument(parser)
    add_exact_argument(parser)


def add_exact_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--exact",
        action="store_true",
        help="also trace every GIL acquisition and garbage collection with uprobes (root; needs interpreter symbols)",
    )


def sample_until_stopped(
    session: Session,
    sampler: Any,
    duration_s: Optional[float],
    stop: Any,
    native_error: type[BaseException],
    syscall_name: Optional[Callable[[int], str]] = None,
    clock: Callable[[], float] = time.monotonic,
    progress: Optional[Progress] = None,
) -> None:
    """Collect batches into ``session`` until the duration, the target's exit, or ``stop.requested``.

    Sets ``session.duration_s`` (wall time spent) and ``session.stopped_by``. ``progress`` is
    updated after every batch and cleared at the end.
    """
    started = clock()
    stopped_by = "interrupt"
    try:
        while not stop.requested:
            chunk = CHUNK_S
            if duration_s is not None:
                remaining = duration_s - (clock() - started)
                # Less than half a period left: one more pass would land past the end.
                if remaining < 0.5 * session.period_s:
                    stopped_by = "duration"
                    break
                chunk = min(chunk, remaining)
            try:
                batch = sampler.collect(chunk)
            except native_error as e:
                if getattr(e, "kind", None) != "target_exited":
                    raise
                session.exited = True
                stopped_by = "target_exit"
                break
            session.add_batch(batch, syscall_name)
            if progress is not None:
                progress.update(session.samples, len(session.thread_names))
            if batch.get("exited"):
                stopped_by = "target_exit"
                break
    except KeyboardInterrupt:  # a Ctrl-C that arrived before our handler was installed
        stopped_by = "interrupt"
    finally:
        if progress is not None:
            progress.clear()
    session.duration_s = clock() - started
    session.stopped_by = stopped_by


def finish(session: Session, launched: bool) -> int:
    """Exit status of a finished recording; marks it partial when the target left early.

    A target exiting is how a `-- CMD` recording normally ends. With --pid and a --duration
    it means the result covers less time than asked for: partial, exit 8.
    """
    if session.stopped_by == "target_exit":
        if session.samples == 0:
            raise CommandError(f"pid {session.target.pid} exited before anything was recorded", EXIT_TARGET_EXITED)
        requested = session.requested_duration_s
        if not launched and requested is not None and session.duration_s < requested:
            session.mark_partial(
                f"pid {session.target.pid} exited after {session.duration_s:.1f} s of the requested {requested:g} s"
            )
            return EXIT_PARTIAL
    return EXIT_OK


def open_sampler(native: Any, target: Any, rate_hz: float, exact: bool) -> Any:
    """A Sampler, with uprobe tracing attached when ``exact``; a refusal is one line, exit 9."""
    if not exact:
        return native.Sampler(target, rate_hz)
    try:
        return native.Sampler(target, rate_hz, exact=True)
    except native.GiltyError as e:
        if getattr(e, "kind", None) == "exact_unavailable":
            raise CommandError(f"{e} (record without --exact to sample only)", EXIT_EXACT_UNAVAILABLE) from None
        raise


def exact_summary(sampler: Any) -> Optional[dict]:
    raw = sampler.exact_summary()
    if raw is not None:
        raw["symbols"] = list(sampler.exact_symbols)
    return raw


def run(args: argparse.Namespace) -> int:
    child_argv = getattr(args, "child_argv", None)
    if (args.pid is None) == (child_argv is None):
        raise UsageError("give either --pid PID or -- CMD [ARG ...] (see `gilty record --help`)")
    fmt = output_format(args.format, args.output)
    native = launch.native_module()

    # Signals are caught from the start, so that a SIGTERM while CMD starts still stops CMD.
    with launch.StopSignals() as stop:
        child = None
        try:
            if child_argv is not None:
                child = launch.start_command(child_argv)
                target = launch.attach_to_command(native, child, child_argv, stop=stop)
            else:
                target = launch.attach(native, args.pid)
            # Read before creating the Sampler: the native Target hands its reader over to it.
            session = Session(TargetInfo.from_native(target), args.rate)
            session.command = child_argv
            session.requested_duration_s = args.duration
            sampler = open_sampler(native, target, args.rate, args.exact)
            until = f"for {args.duration:g} s" if args.duration else "until Ctrl-C"
            print(
                f"gilty: recording pid {session.target.pid} (Python {session.target.python_version}) "
                f"at {args.rate:g} Hz {until}",
                file=sys.stderr,
            )
            try:
                sample_until_stopped(
                    session, sampler, args.duration, stop, native.GiltyError, native.syscall_name,
                    progress=Progress(sys.stderr),
                )
            finally:
                if args.exact:
                    session.exact = exact_summary(sampler)
        finally:
            if child is not None:
                launch.terminate(child)

    status = finish(session, launched=child is not None)
    if session.partial:
        print(f"gilty: {session.partial_reason}; the result is PARTIAL", file=sys.stderr)
    renderer = json_report.render if fmt == "json" else console.render
    emit(renderer(session), args.output)
    return status
