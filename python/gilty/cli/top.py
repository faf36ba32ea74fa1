"""Live view: each thread's state shares over the last second, and where it is.

  gilty top --pid 4242

Refreshes every second (in place on a terminal; one block per second otherwise) until
Ctrl-C, the target's exit, or --duration.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Optional, TextIO

from gilty import launch
from gilty._errors import EXIT_OK, EXIT_TARGET_EXITED, CommandError
from gilty.cli.record import CHUNK_S, DEFAULT_RATE_HZ, add_exact_argument, open_sampler, positive_float, positive_int
from gilty.renderers.console import render_top
from gilty.session import Session, TargetInfo

REFRESH_S = 1.0
CLEAR_AND_HOME = "\x1b[2J\x1b[H"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pid", type=positive_int, required=True, help="the process to watch")
    parser.add_argument(
        "--rate",
        type=positive_float,
        default=DEFAULT_RATE_HZ,
        metavar="HZ",
        help="samples per second (default: %(default)g)",
    )
    parser.add_argument(
        "--duration", type=positive_float, metavar="S", help="stop after S seconds (default: until Ctrl-C or exit)"
    )
    add_exact_argument(parser)


def show(window: Session, elapsed_s: float, out: TextIO, tty: bool, sampler: Any = None) -> None:
    # With exact mode, the window also gets the exact figures of the same stretch.
    exact_window = getattr(sampler, "exact_window", None) if sampler is not None else None
    if exact_window is not None and getattr(sampler, "exact_symbols", None):
        window.exact = exact_window()
    frame = render_top(window, elapsed_s)
    out.write(CLEAR_AND_HOME + frame if tty else frame + "\n")
    out.flush()


def watch(
    base: Session,
    sampler: Any,
    duration_s: Optional[float],
    stop: Any,
    native_error: type[BaseException],
    out: TextIO,
    tty: bool,
    syscall_name: Optional[Callable[[int], str]] = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple:
    """Sample and show one frame per REFRESH_S. Returns (samples seen, target exited)."""
    started = window_started = clock()
    window = base.window()
    total = 0
    exited = False
    try:
        while not stop.requested:
            now = clock()
            chunk = min(CHUNK_S, window_started + REFRESH_S - now)
            if duration_s is not None:
                remaining = duration_s - (now - started)
                if remaining < 0.5 * base.period_s:
                    break
                chunk = min(chunk, remaining)
            try:
                batch = sampler.collect(max(chunk, 0.5 * base.period_s))
            except native_error as e:
                if getattr(e, "kind", None) != "target_exited":
                    raise
                exited = True
                break
            window.add_batch(batch, syscall_name)
            total += len(batch["times"])
            if batch.get("exited"):
                exited = True
                break
            now = clock()
            if now - window_started >= REFRESH_S - 1e-3:
                window.duration_s = now - window_started
                show(window, now - started, out, tty, sampler)
                window, window_started = base.window(), now
    except KeyboardInterrupt:
        pass
    if window.samples:  # the last, shorter stretch
        window.duration_s = clock() - window_started
        show(window, clock() - started, out, tty, sampler)
    return total, exited


def run(args: argparse.Namespace) -> int:
    native = launch.native_module()
    target = launch.attach(native, args.pid)
    base = Session(TargetInfo.from_native(target), args.rate)  # before Sampler takes the reader
    sampler = open_sampler(native, target, args.rate, args.exact)
    with launch.StopSignals() as stop:
        total, exited = watch(
            base, sampler, args.duration, stop, native.GiltyError, sys.stdout, sys.stdout.isatty(), native.syscall_name
        )
    if exited:
        if total == 0:
            raise CommandError(f"pid {args.pid} exited before anything was recorded", EXIT_TARGET_EXITED)
        print(f"gilty: pid {args.pid} exited", file=sys.stderr)
    return EXIT_OK
