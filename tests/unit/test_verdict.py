"""The verdict's sentences for the cases a user meets."""

from gilty.sampling.analysis import summarise
from synthetic import (
    CLOCK_NANOSLEEP,
    EPOLL_WAIT,
    GC,
    HOLD,
    IDLE,
    NATIVE,
    UNKNOWN,
    WAIT,
    BatchBuilder,
    contention_session,
    make_session,
)


def test_contention_names_holder_waiters_and_function():
    session, _ = contention_session()
    verdict = summarise(session).verdict
    assert verdict.kinds[:2] == ["contention", "convoy"]
    text = verdict.text
    assert text.startswith("Thread 'metrics' (tid 2) holds the GIL 89% of the time;")
    assert "threads 'io-2', 'io-1' wait for it 22-33% of their time" in text
    # io-1's 2 waits per cycle and io-2's 2 of 3 are while metrics spins: 4 of 5.
    assert "80% of that while 'metrics' runs spin() (app.py:12)" in text
    assert "Convoy: 'io-1', 'io-2' wait 25 ms per wake-up" in text


def test_shared_names_are_told_apart_by_tid():
    b = BatchBuilder(names={1: "python", 2: "python", 3: "python"})
    spin = b.stack(("spin", "app.py", 6))
    passes = [{1: (HOLD, spin), 2: WAIT, 3: WAIT}] * 50 + [{1: (HOLD, spin), 2: IDLE, 3: IDLE}] * 50
    text = summarise(make_session([b.batch(passes)])).verdict.text
    assert "Thread 'python' (tid 1) holds the GIL 100%" in text
    assert "threads 'python' (tid 2), 'python' (tid 3) wait for it 50%" in text


def test_a_pool_is_named_once():
    # ThreadPoolExecutor(8) trading the GIL: the verdict listed 'ThreadPoolExecutor-0_0', '..._4',
    # '..._1' and 6 more, twice over.
    names = {1: "MainThread", **{10 + i: f"ThreadPoolExecutor-0_{i}" for i in range(8)}}
    b = BatchBuilder(names=names)
    parse = b.stack(("parse_doc", "job.py", 9))
    passes = [{1: IDLE, **{10 + i: ((HOLD, parse) if (n + i) % 8 == 0 else WAIT) for i in range(8)}} for n in range(200)]
    text = summarise(make_session([b.batch(passes)])).verdict.text
    assert "Threads 'ThreadPoolExecutor-0_#' (8 threads) wait for the GIL 88% of their time" in text, text
    assert "and 6 more" not in text and "'ThreadPoolExecutor-0_1'" not in text, text
    assert "(largest holders: 'ThreadPoolExecutor-0_#' (8 threads) 100%)" in text, text


def test_no_contention():
    b = BatchBuilder(names={1: "main", 2: "worker"})
    passes = [{1: HOLD, 2: (IDLE, -1, EPOLL_WAIT)}] * 30 + [{1: (IDLE, -1, CLOCK_NANOSLEEP), 2: HOLD}] * 70 + [{1: WAIT, 2: HOLD}]
    verdict = summarise(make_session([b.batch(passes)])).verdict
    assert verdict.kinds == ["no_contention"]
    assert verdict.text.startswith("No GIL contention: the GIL is busy 100% of the time and no thread waits for it more than 1%")


def test_mostly_idle():
    b = BatchBuilder(names={1: "main"})
    passes = [{1: (IDLE, -1, EPOLL_WAIT)}] * 199 + [{1: HOLD}]
    verdict = summarise(make_session([b.batch(passes)])).verdict
    assert verdict.kinds == ["no_contention", "idle"]
    assert "mostly idle" in verdict.text


def test_native_code_dominates():
    b = BatchBuilder(names={1: "main", 2: "numpy-worker"})
    dot = b.stack(("matmul", "model.py", 44))
    passes = [{1: (IDLE, -1, CLOCK_NANOSLEEP), 2: (NATIVE, dot)}] * 90 + [{1: HOLD, 2: (HOLD, dot)}] * 10
    verdict = summarise(make_session([b.batch(passes)])).verdict
    assert "native" in verdict.kinds
    assert (
        "Native code: 'numpy-worker' runs native code without the GIL 90% of its time "
        "(mostly under matmul() (model.py:44))." in verdict.text
    )


def test_garbage_collection_dominates():
    b = BatchBuilder(names={1: "main"})
    passes = [{1: GC}] * 40 + [{1: HOLD}] * 60
    verdict = summarise(make_session([b.batch(passes)])).verdict
    assert "gc" in verdict.kinds
    assert "Garbage collection holds the GIL 40% of the time, mostly in thread 'main'." in verdict.text


def test_waits_without_a_holder():
    b = BatchBuilder(names={1: "a", 2: "b"})
    passes = [{1: WAIT, 2: IDLE}] * 20 + [{1: IDLE, 2: IDLE}] * 80
    verdict = summarise(make_session([b.batch(passes)])).verdict
    assert "no thread was seen holding it" in verdict.text


def test_resolution_limited_convoy_says_so():
    b = BatchBuilder(rate_hz=100, names={1: "metrics", 2: "io"})
    passes = ([{1: HOLD, 2: IDLE}] * 8 + [{1: HOLD, 2: WAIT}]) * 20
    verdict = summarise(make_session([b.batch(passes)], rate_hz=100)).verdict
    assert "convoy" in verdict.kinds
    assert "Convoy: 'io' waits up to 10 ms per wake-up" in verdict.text
    assert "record with --rate 1000" in verdict.text


def test_unknown_and_few_samples_are_flagged():
    b = BatchBuilder(names={1: "main"})
    verdict = summarise(make_session([b.batch([{1: UNKNOWN}] * 5 + [{1: HOLD}] * 5)])).verdict
    assert "unknown" in verdict.kinds and "few_samples" in verdict.kinds
    assert "Only 10 samples" in verdict.text


def test_empty():
    verdict = summarise(make_session([])).verdict
    assert verdict.kinds == ["empty"] and verdict.text == "No samples were recorded."


def test_no_single_holder_among_many():
    # Waits spread evenly over three holders, each in many functions: no one is blamed, and the
    # per-thread blame list's truncation (10 entries) must not shrink any holder's share.
    names = {1: "a", 2: "b", 3: "c", 9: "waiter"}
    b = BatchBuilder(names=names)
    passes = []
    for i in range(300):
        holder = (1, 2, 3)[i % 3]
        stack = b.stack((f"f{i % 40}", "app.py", i % 40))
        p = {tid: IDLE for tid in (1, 2, 3)}
        p[holder] = (HOLD, stack)
        p[9] = WAIT
        passes.append(p)
    text = summarise(make_session([b.batch(passes)])).verdict.text
    assert "Thread 'waiter' waits for the GIL 100% of its time; no single thread holds it most of that time" in text
    assert "(largest holders: 'a' 33%, 'b' 33%, 'c' 33%)" in text


CPU_WAIT = 6


def test_starvation_smaller_than_contention_is_said_after_it():
    # A busy host costs each thread a few percent; the GIL holder's 60% stays the headline.
    b = BatchBuilder(names={1: "metrics", 2: "io", 3: "hasher"})
    spin = b.stack(("aggregate", "app.py", 9))
    passes = (
        [{1: (HOLD, spin), 2: WAIT, 3: NATIVE}] * 40
        + [{1: (HOLD, spin), 2: IDLE, 3: CPU_WAIT}] * 8
        + [{1: (IDLE, -1, CLOCK_NANOSLEEP), 2: IDLE, 3: NATIVE}] * 52
    )
    verdict = summarise(make_session([b.batch(passes)])).verdict
    assert verdict.text.startswith("Thread 'metrics' (tid 1) holds the GIL 48% of the time;"), verdict.text
    assert "CPU starved: Thread 'hasher' waits for a CPU 8% of its time" in verdict.text
    assert verdict.text.index("holds the GIL") < verdict.text.index("CPU starved")


def test_starvation_larger_than_contention_is_said_first():
    b = BatchBuilder(names={1: "metrics", 2: "io"})
    passes = [{1: HOLD, 2: WAIT}] * 10 + [{1: CPU_WAIT, 2: CPU_WAIT}] * 40 + [{1: HOLD, 2: IDLE}] * 50
    verdict = summarise(make_session([b.batch(passes)])).verdict
    assert verdict.text.startswith("CPU starved: Threads"), verdict.text
    assert verdict.kinds[:2] == ["cpu_starved", "contention"]
