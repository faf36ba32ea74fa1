"""`gilty top` without a terminal: one block per second, then the last partial second.

Driven by a scripted sampler of synthetic batches, like test_record: this checks gilty's own
refresh loop, not the native sampler.
"""

import io

from gilty.report.live import CLEAR_AND_HOME, Screen
from gilty.sampling import top_run
from synthetic import HOLD, IDLE, BatchBuilder, make_session
from test_record_loop import PER_SLICE


def watch(base, sampler, duration_s, stop, native_error, out, tty, clock):
    """top's one-process run drawn on a Screen writing to ``out``, as `gilty top` draws it."""
    return top_run.watch(base, sampler, duration_s, stop, native_error, Screen(out, tty).one, clock=clock)


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


class ScriptedSampler:
    def __init__(self, builder, clock, passes_per_call, calls, exit_on_last=False):
        self.b, self.clock, self.n, self.calls, self.exit_on_last = builder, clock, passes_per_call, calls, exit_on_last
        self.made = 0

    def collect(self, seconds):
        self.clock.now += seconds
        self.made += 1
        last = self.made >= self.calls
        return self.b.batch([{1: HOLD, 2: IDLE}] * self.n, exited=last and self.exit_on_last)


class Stop:
    requested = False


def test_one_block_per_second_until_duration():
    b, clock, out = BatchBuilder(names={1: "metrics", 2: "main"}), Clock(), io.StringIO()
    base = make_session([])
    total, exited = watch(base, ScriptedSampler(b, clock, PER_SLICE, 100), 2.5, Stop(), RuntimeError, out, tty=False, clock=clock)
    blocks = out.getvalue().split("\n\n")
    frames = [block for block in blocks if block.startswith("gilty top:")]
    assert len(frames) == 3  # two full seconds and the last half second
    assert "metrics" in frames[0] and "100%" in frames[0]
    assert "100 samples in the last 1.0 s" in frames[0]
    assert "50 samples in the last 0.5 s" in frames[2]
    assert total == 250 and not exited
    assert CLEAR_AND_HOME not in out.getvalue()


def test_terminal_redraws_in_place_and_target_exit_ends():
    b, clock, out = BatchBuilder(), Clock(), io.StringIO()
    total, exited = watch(
        make_session([]),
        ScriptedSampler(b, clock, PER_SLICE, 150 // PER_SLICE, exit_on_last=True),
        None,
        Stop(),
        RuntimeError,
        out,
        tty=True,
        clock=clock,
    )
    assert exited and total == 150
    assert out.getvalue().count(CLEAR_AND_HOME) == 2
