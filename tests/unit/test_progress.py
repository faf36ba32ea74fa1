"""The progress line of a long `gilty record`: on a terminal only, about once a second, cleared at the end."""

import io

from gilty.sampling.capture import Progress
from gilty.sampling.record_run import sample_until_stopped
from synthetic import HOLD, BatchBuilder, make_session
from test_record_loop import PER_SLICE, Clock, ScriptedSampler, Stop


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_nothing_is_written_when_stderr_is_not_a_terminal():
    out = io.StringIO()
    progress = Progress(out)
    progress.update(100, 3)
    progress.clear()
    assert out.getvalue() == ""


def test_one_line_rewritten_in_place_at_most_once_a_second():
    out, clock = Terminal(), Clock()
    progress = Progress(out, clock=clock)
    clock.now += 61.5
    progress.update(6150, 32)
    clock.now += 0.5
    progress.update(6200, 32)  # too soon: not shown
    clock.now += 0.5
    progress.update(6250, 33, processes=4)
    text = out.getvalue()
    assert "\n" not in text
    lines = text.split("\r")[1:]
    assert len(lines) == 2
    assert lines[0].startswith("gilty: recording 0:01:01, 6,150 samples, 1 process, 32 threads")
    assert lines[1].startswith("gilty: recording 0:01:02, 6,250 samples, 4 processes, 33 threads")


def test_the_recording_loop_updates_and_clears_the_line():
    b, clock, out = BatchBuilder(), Clock(), Terminal()
    sampler = ScriptedSampler([b.batch([{1: HOLD, 2: HOLD}] * PER_SLICE) for _ in range(300 // PER_SLICE)], clock)
    session = make_session([])
    progress = Progress(out, clock=clock)
    sample_until_stopped(session, sampler, 3.0, Stop(), RuntimeError, clock=clock, progress=progress)
    shown = [part for part in out.getvalue().split("\r") if part.strip()]
    # 3 s of 100 Hz slices: shown after the first, then once a second.
    counts = [int(line.split(", ")[1].split()[0]) for line in shown]
    assert counts[0] == PER_SLICE and len(counts) == 3, counts
    # a second apart, to the slice (the clock's sum of slices may fall a hair short of a whole second)
    assert all(100 <= b - a <= 100 + PER_SLICE for a, b in zip(counts, counts[1:])), counts
    assert "2 threads" in shown[-1]
    # Cleared: the screen ends with the line blanked and the cursor at its start.
    assert out.getvalue().endswith("\r" + " " * len(shown[-1]) + "\r")
