"""The run lifecycle every command shares: one collect loop, the stop flag, the `-- CMD` child and
the thread hand-off. Commands (record, top, serve, memory, load, specialization) build on these
instead of writing their own loops.

The loop::

    with capture.Stop() as stop:                      # SIGINT/SIGTERM set stop.requested
        with capture.Command(argv) as command:        # argv None: nothing started
            ended = capture.collect_until(step, period_s, duration_s, stop, progress=..., tally=...)
        command.status                                # CMD's exit status once stopped

``step(seconds)`` collects for ``seconds`` (one native ``collect`` call), merges what it got, and
returns True when the target is gone; ``collect_until`` calls it in slices of ``SLICE_S`` until the
duration ends, ``stop.requested``, or ``step`` says the target exited, and returns a ``Captured``
(``stopped_by``: "duration", "interrupt" or "target_exit"; ``wall_s``).

The hand-off (a blocking call run in a thread while the main thread samples or waits for Ctrl-C)::

    call = capture.in_thread(run_load, "gilty-load")  # started; call.done is a threading.Event
    ... collect_until(step, ..., capture.stop_when(lambda: stop.requested, call.done.is_set)) ...
    result = call.result()                            # joins; re-raises the call's exception

or, with nothing to sample meanwhile, ``capture.wait_for(run_load, stop, on_stop, "gilty-load")``.

Progress (``Progress``): one line on a terminal's stderr, rewritten about once a second, cleared at
the end; nothing when stderr is not a terminal. Behaviour on Ctrl-C, SIGTERM and the target's exit
is tested here once: tests/integration/test_capture.py.
"""

from __future__ import annotations

import signal
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Any, Callable, Optional, TextIO

from gilty.sampling import launch

# Every native collect() call samples at most this long with the GIL released, and Python sees a
# Ctrl-C, SIGTERM, a finished load step or a key press only between calls: the stop latency. A tenth
# of a second is what process sets and load's step profiles used: a longer slice lets a step's
# profile run on past the step's end (idle samples of a server no longer sent traffic). The native
# side keeps its own schedule across calls, so the slice decides no pass time.
SLICE_S = 0.1
# A call never shorter than this (a refresh or a deadline a hair away): a zero-length call is a spin.
MIN_SLICE_S = 1e-3
# How often ``wait_for`` looks at the stop flag while the call runs.
POLL_S = 0.05


def ends_now(remaining_s: float, period_s: float) -> bool:
    """The one end test of a --duration: less than half a period left. A pass stands for the
    period that follows it, so one taken this close to the end would stand mostly for time after
    it; `gilty record` has always stopped there (with a period-less source, give a period of 0.02 s
    for the 10 ms margin `gilty memory` keeps)."""
    return remaining_s < 0.5 * period_s


class Captured:
    """How a ``collect_until`` ended: ``stopped_by`` ("duration", "interrupt" or "target_exit")
    and ``wall_s``, the wall time from its start to its end."""

    __slots__ = ("stopped_by", "wall_s")

    def __init__(self, stopped_by: str, wall_s: float) -> None:
        self.stopped_by = stopped_by
        self.wall_s = wall_s

    def __repr__(self) -> str:
        return f"Captured({self.stopped_by!r}, {self.wall_s:.3f})"


def collect_until(
    step: Callable[[float], bool],
    period_s: float,
    duration_s: Optional[float],
    stop: Any,
    clock: Callable[[], float] = time.monotonic,
    due: Optional[Callable[[float], float]] = None,
    progress: Optional[Progress] = None,
    tally: Optional[Callable[[], tuple]] = None,
) -> Captured:
    """Call ``step(seconds)`` in slices until ``duration_s`` ends (``ends_now``), ``stop.requested``,
    or ``step`` returns True (the target exited).

    ``due(now)``, when given, is the clock time at which the caller wants control back (the next
    frame of `gilty top`): a slice ends there. ``progress.update(*tally())`` runs after every slice
    and ``progress.clear()`` at the end, however the loop ends. A KeyboardInterrupt (a Ctrl-C that
    came before ``Stop`` was installed) ends it as an interrupt; any other exception propagates.
    """
    started = clock()
    stopped_by = "interrupt"
    try:
        while not stop.requested:
            now = clock()
            seconds = SLICE_S
            if due is not None:
                seconds = min(seconds, max(due(now) - now, MIN_SLICE_S))
            if duration_s is not None:
                remaining = duration_s - (now - started)
                if ends_now(remaining, period_s):
                    stopped_by = "duration"
                    break
                seconds = min(seconds, remaining)
            ended = step(seconds)
            if progress is not None and tally is not None:
                progress.update(*tally())
            if ended:
                stopped_by = "target_exit"
                break
    except KeyboardInterrupt:
        stopped_by = "interrupt"
    finally:
        if progress is not None:
            progress.clear()
    return Captured(stopped_by, clock() - started)


# -- stopping ------------------------------------------------------------------------------------


class Stop:
    """The user's stop: SIGINT and SIGTERM set ``requested`` while the ``with`` block runs (handlers
    are installed here and nowhere else, and the previous ones restored at its end); ``set()`` does
    the same from code. A flag and not a KeyboardInterrupt: the loop finishes the slice being
    collected (at most ``SLICE_S``), stops, and the result is still written. Outside the main
    thread no handler can be installed and the flag is only set by ``set()``.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self.signum: Optional[int] = None
        self._previous: dict = {}

    def set(self, signum: Optional[int] = None) -> None:
        # A plain attribute, not a threading.Event: a signal handler must not take a lock the
        # interrupted main thread may hold.
        self.requested = True
        self.signum = signum

    def _handle(self, signum: int, _frame: Any) -> None:
        self.set(signum)

    def __enter__(self) -> Stop:
        try:
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


class stop_when:  # noqa: N801 - used like a function: capture.stop_when(test, test, ...)
    """A stop that is ``requested`` as soon as any of ``tests`` (callables) returns true: the user's
    stop and a finished hand-off, or `gilty top`'s q key."""

    def __init__(self, *tests: Callable[[], bool]) -> None:
        self.tests = tests

    @property
    def requested(self) -> bool:
        return any(test() for test in self.tests)


# -- the `-- CMD` child ----------------------------------------------------------------------------


class Command:
    """`-- CMD` for the length of a ``with`` block: started on entry in its own session, with a
    guard that stops it if gilty dies (launch.start_command); stopped on exit however the block ends
    (SIGINT, SIGTERM after 2 s, SIGKILL after 2 more: launch.terminate), its exit status then in
    ``status``. With ``argv`` None nothing is started and ``process`` stays None."""

    def __init__(self, argv: Optional[list]) -> None:
        self.argv = argv
        self.process: Any = None
        self.status: Optional[int] = None

    def __enter__(self) -> Command:
        if self.argv is not None:
            self.process = launch.start_command(self.argv, die_with_gilty=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.process is not None:
            self.status = launch.terminate(self.process)


# -- the thread hand-off ---------------------------------------------------------------------------


class InThread:
    """A blocking call running in a daemon thread (started by ``in_thread``): ``done`` is set when it
    returns or raises; ``result()`` waits for it and returns its value or raises its exception in
    the caller's thread."""

    def __init__(self, call: Callable[[], Any], name: str) -> None:
        self.done = threading.Event()
        self._out: dict = {}
        self._call = call
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._out["result"] = self._call()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            self._out["error"] = e
        finally:
            self.done.set()

    def result(self) -> Any:
        self.thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["result"]


def in_thread(call: Callable[[], Any], name: str) -> InThread:
    """Start ``call()`` in a thread named ``name``; see ``InThread``."""
    return InThread(call, name)


def wait_for(call: Callable[[], Any], stop: Any, on_stop: Callable[[], None], name: str) -> Any:
    """``call()`` in a thread while the main thread watches ``stop`` (it alone sees Ctrl-C):
    ``on_stop()`` once when the user stops, asking the call to end early; then the call's result,
    or its exception."""
    running = in_thread(call, name)
    asked = False
    while not running.done.wait(POLL_S):
        if stop.requested and not asked:
            on_stop()
            asked = True
    return running.result()


# -- progress ------------------------------------------------------------------------------------

UPDATE_EVERY_S = 1.0


def _clock_text(seconds: float) -> str:
    """3723.4 -> '1:02:03'."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """One line on stderr that a long recording is still sampling and what it has seen: rewritten
    in place at most once a second, on a terminal only (in a log file, a pipe or CI it would be
    noise). ``collect_until`` calls ``update`` after every slice and ``clear`` at the end."""

    def __init__(
        self,
        stream: TextIO,
        enabled: Optional[bool] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self.clock = clock
        self.started = clock()
        self._last_shown: Optional[float] = None
        self._width = 0  # of the line on screen, so that a shorter one or clear() blanks it all

    def update(self, samples: int, threads: int, processes: int = 1) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if self._last_shown is not None and now - self._last_shown < UPDATE_EVERY_S:
            return
        self._last_shown = now
        plural = "" if processes == 1 else "es"
        line = (
            f"gilty: recording {_clock_text(now - self.started)}, {samples:,} samples, "
            f"{processes} process{plural}, {threads} thread{'' if threads == 1 else 's'} (Ctrl-C to stop)"
        )
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def clear(self) -> None:
        """Blank the line, so that what is printed next starts on a clean line."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
