"""Blame: who held the GIL in the very pass a thread was seen waiting."""

import math

from gilty.sampling.analysis.blame import NO_HOLDER_NAME, blame
from synthetic import GC, HOLD, IDLE, WAIT, BatchBuilder, contention_session, make_session


def test_waits_are_attributed_to_the_holder_of_the_same_pass():
    b = BatchBuilder(names={1: "metrics", 2: "io", 3: "gc-er"})
    spin = b.stack(("spin", "app.py", 12))
    alloc = b.stack(("alloc", "app.py", 30))
    passes = (
        [{1: (HOLD, spin), 2: WAIT}] * 6
        + [{3: (GC, alloc), 2: WAIT, 1: IDLE}] * 2
        + [{1: IDLE, 2: WAIT, 3: IDLE}] * 2  # a hand-off: nobody holds it
        + [{1: (HOLD, spin), 2: IDLE}] * 5
    )
    session = make_session([b.batch(passes)])
    shares = blame(session)
    assert set(shares) == {2}
    got = [(s.holder_tid, s.holder_name, s.holder_function, s.holder_line, s.fraction) for s in shares[2]]
    assert got == [
        (1, "metrics", "spin", 12, 0.6),
        (3, "gc-er", "alloc", 30, 0.2),
        (None, NO_HOLDER_NAME, None, None, 0.2),
    ]
    assert math.isclose(sum(s.fraction for s in shares[2]), 1.0)


def test_a_torn_pass_with_two_holders_blames_the_first_one_seen():
    b = BatchBuilder()
    session = make_session([b.batch([{3: WAIT, 1: HOLD, 2: HOLD}, {3: WAIT, 2: GC}])])
    assert session.blame == {(3, 1, -1): 1, (3, 2, -1): 1}
    assert [s.holder_tid for s in blame(session)[3]] == [1, 2]


def test_blame_in_contention_scenario():
    session, _ = contention_session()
    shares = blame(session)
    # io-1 only ever waits while metrics spins.
    assert [(s.holder_name, s.holder_function) for s in shares[3]] == [("metrics", "spin")]
    # io-2 also waits one pass in three while io-1 holds the GIL.
    io2 = {s.holder_name: s.fraction for s in shares[4]}
    assert math.isclose(io2["metrics"], 2 / 3) and math.isclose(io2["io-1"], 1 / 3)
    # metrics waits only while io-1 runs.
    assert [s.holder_name for s in shares[2]] == ["io-1"]
