"""The load report's event-loop lines: a loop that lags at some step gets a line per step; one that
never left its selector (gunicorn's arbiter runs one, and served none of the load) gets one line."""

from __future__ import annotations

from gilty.load import profile
from gilty.load.eventloop import LoopLag
from gilty.report.load.text import server_sections


def _step(*loops) -> profile.StepProfile:
    return profile.StepProfile(
        processes=2,
        busy_processes=1,
        gil_utilisation=0.3,
        gc_share=0.0,
        mean_waiting_threads=0.0,
        states={},
        idle_kinds={},
        loops=list(loops),
    )


def _loop(pid: int, spans: int, lag_s: float, at_rest: float) -> LoopLag:
    return LoopLag(
        pid, pid + 1, "Thread-1 (_run_loop)" if pid == 10 else "MainThread", 0.02, at_rest, spans, lag_s, lag_s / 3, lag_s
    )


def test_a_loop_that_never_lagged_is_one_line_and_a_lagging_one_a_line_per_step():
    steps = [
        _step(_loop(10, 0, 0.0, 1.0), _loop(20, 0, 0.0, 0.9)),
        _step(_loop(10, 0, 0.0, 0.99), _loop(20, 3, 0.3, 0.6)),
    ]
    lines = [line for line in server_sections(["10 rps", "20 rps"], steps) if "pid " in line]
    # before: four lines, two of them the arbiter's "at its selector 100%, 0 lag spans"
    assert lines == [
        "      10 rps: pid 20 MainThread: at its selector 90%, 0 lag spans > 20 ms (max 0 ms), lagging 0%",
        "      20 rps: pid 20 MainThread: at its selector 60%, 3 lag spans > 20 ms (max 300 ms), lagging 10%",
        "  every step: pid 10 Thread-1 (_run_loop): at its selector 99% or more, no lag span > 20 ms",
    ], lines
