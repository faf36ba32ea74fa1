"""`gilty record`'s ending rules: duration, Ctrl-C, target exit, partial results.

``finish`` and ``output_format`` are pure. The sampling loop is driven by a scripted object
returning synthetic batches: it checks gilty's own loop logic (chunking, stop flag, exit),
not anything the native sampler decides.
"""

import pytest
from gilty._errors import EXIT_OK, EXIT_PARTIAL, EXIT_TARGET_EXITED, CommandError
from gilty.report import output_format
from gilty.sampling.capture import SLICE_S

PER_SLICE = round(SLICE_S * 100)  # passes of one collect() call at the tests' 100 Hz
from gilty.sampling.record_run import finish, sample_until_stopped
from synthetic import HOLD, BatchBuilder, make_session


class ScriptedSampler:
    def __init__(self, batches, clock, stop=None, stop_after=None, error=None):
        self.batches = list(batches)
        self.clock = clock
        self.calls = []
        self.stop, self.stop_after, self.error = stop, stop_after, error

    def collect(self, seconds):
        self.calls.append(seconds)
        self.clock.now += seconds
        if self.stop is not None and len(self.calls) == self.stop_after:
            self.stop.requested = True  # as the SIGINT handler does, mid-collect
        if self.error is not None and not self.batches:
            raise self.error
        return self.batches.pop(0)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Stop:
    requested = False


def test_duration_is_sampled_in_chunks_and_ends_exactly():
    b, clock = BatchBuilder(), Clock()
    session = make_session([])
    whole = int(1.1 / SLICE_S + 1e-9)
    sampler = ScriptedSampler([b.batch([{1: HOLD}] * PER_SLICE) for _ in range(whole + 1)], clock)
    sample_until_stopped(session, sampler, 1.1, Stop(), RuntimeError, clock=clock)
    # whole slices, then what is left of the duration (none when it divides evenly)
    rest = round(1.1 - whole * SLICE_S, 9)
    assert sampler.calls == pytest.approx([SLICE_S] * whole + ([rest] if rest >= 0.005 else []))
    assert session.stopped_by == "duration"
    assert session.duration_s == pytest.approx(1.1)
    assert finish(session, launched=False) == EXIT_OK


def test_ctrl_c_keeps_the_batch_being_collected():
    b, clock, stop = BatchBuilder(), Clock(), Stop()
    sampler = ScriptedSampler([b.batch([{1: HOLD}] * 25) for _ in range(3)], clock, stop=stop, stop_after=2)
    session = make_session([])
    sample_until_stopped(session, sampler, None, stop, RuntimeError, clock=clock)
    assert len(sampler.calls) == 2
    assert session.samples == 50
    assert session.stopped_by == "interrupt"
    assert finish(session, launched=False) == EXIT_OK and not session.partial


def test_target_exit_before_duration_with_pid_is_partial():
    b, clock = BatchBuilder(), Clock()
    sampler = ScriptedSampler(
        [b.batch([{1: HOLD}] * PER_SLICE) for _ in range(2)] + [b.batch([{1: HOLD}] * 3, exited=True)], clock
    )
    session = make_session([])
    session.requested_duration_s = 10.0
    sample_until_stopped(session, sampler, 10.0, Stop(), RuntimeError, clock=clock)
    assert session.stopped_by == "target_exit"
    assert finish(session, launched=False) == EXIT_PARTIAL
    assert session.partial
    # 2 slices and 3 passes at 100 Hz: the recording ends at the last pass, not at the end of the
    # scripted chunk in which the exit was seen.
    assert session.partial_reason == f"pid 4242 exited after {2 * SLICE_S + 0.03:.1f} s of the requested 10 s"


def test_target_exit_is_the_normal_end_of_a_launched_command():
    b, clock = BatchBuilder(), Clock()
    sampler = ScriptedSampler([b.batch([{1: HOLD}] * 3, exited=True)], clock)
    session = make_session([])
    session.requested_duration_s = 10.0
    sample_until_stopped(session, sampler, 10.0, Stop(), RuntimeError, clock=clock)
    assert finish(session, launched=True) == EXIT_OK and not session.partial


def test_target_exit_without_duration_is_not_partial():
    b, clock = BatchBuilder(), Clock()
    sampler = ScriptedSampler([b.batch([{1: HOLD}] * 3, exited=True)], clock)
    session = make_session([])
    sample_until_stopped(session, sampler, None, Stop(), RuntimeError, clock=clock)
    assert finish(session, launched=False) == EXIT_OK


class ExitedError(Exception):
    kind = "target_exited"


def test_exit_raised_by_collect_counts_as_exit_and_nothing_recorded_is_exit_7():
    clock = Clock()
    sampler = ScriptedSampler([], clock, error=ExitedError("gone"))
    session = make_session([])
    sample_until_stopped(session, sampler, 5.0, Stop(), ExitedError, clock=clock)
    assert session.stopped_by == "target_exit" and session.exited
    with pytest.raises(CommandError) as raised:
        finish(session, launched=False)
    assert raised.value.exit_code == EXIT_TARGET_EXITED
    assert "exited before anything was recorded" in raised.value.message


def test_other_native_errors_propagate():
    class Boom(Exception):
        kind = "internal"

    sampler = ScriptedSampler([], Clock(), error=Boom("bad"))
    with pytest.raises(Boom):
        sample_until_stopped(make_session([]), sampler, 5.0, Stop(), Boom, clock=Clock())


@pytest.mark.parametrize(
    "fmt,path,expected",
    [
        (None, None, "text"),
        (None, "out.json", "json"),
        (None, "OUT.JSON", "json"),
        (None, "out.txt", "text"),
        ("text", "out.json", "text"),
        ("json", None, "json"),
    ],
)
def test_output_format(fmt, path, expected):
    assert output_format(fmt, path) == expected
