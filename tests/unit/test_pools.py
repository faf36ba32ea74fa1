"""Thread pools: same-named threads (numbers aside) are one line, shares averaged by samples."""

from gilty.sampling.analysis.pools import group_pools, pool_key, pool_label


def _group(threads):
    return group_pools(threads, name_of=lambda t: t[0], tid_of=lambda t: t[1], counts_of=lambda t: t[2])


def test_numbers_vary_within_a_pool_and_names_do_not():
    assert pool_key("ThreadPoolExecutor-0_3") == pool_key("ThreadPoolExecutor-0_7")
    assert pool_key("AnyIO worker thread") == "AnyIO worker thread"
    assert pool_key("Thread-1 (worker)") != pool_key("Thread-1 (poller)")
    # Only the digits that differ become "#": the executor number all members share stays.
    assert pool_label("", ["ThreadPoolExecutor-0_0", "ThreadPoolExecutor-0_1"]) == "ThreadPoolExecutor-0_#"


# Guards issue 7: eight "AnyIO worker thread" lines flooding a worker's table.
def test_eight_identical_names_are_one_line_with_averaged_shares():
    anyio = [("AnyIO worker thread", 100 + i, [10, 0, 0, 0, 90, 0] if i == 0 else [0, 0, 0, 0, 100, 0]) for i in range(8)]
    pools = _group([("MainThread", 1, [50, 0, 50, 0, 0, 0]), *anyio])
    assert [p.name for p in pools] == ["MainThread", "AnyIO worker thread ×8"]
    pool = pools[1]
    assert pool.size == 8 and pool.samples == 800 and pool.tids[0] == 100
    assert abs(pool.fractions[0] - 10 / 800) < 1e-12  # averaged, not summed
    assert abs(sum(pool.fractions) - 1.0) < 1e-12
    assert pools[0].size == 1 and pools[0].name == "MainThread"


def test_weighting_by_samples():
    # A thread seen 3 times as long weighs 3 times as much.
    pools = _group([("w-1", 1, [30, 0, 0, 0, 0, 0]), ("w-2", 2, [0, 0, 0, 0, 10, 0]), ("w-3", 3, [0, 0, 0, 0, 10, 0])])
    assert len(pools) == 1 and pools[0].label == "w-#"
    assert pools[0].fractions[0] == 0.6


def test_two_numbered_threads_stay_apart():
    pools = _group([("io1", 1, [1, 0, 0, 0, 0, 0]), ("io2", 2, [1, 0, 0, 0, 0, 0])])
    assert [p.name for p in pools] == ["io1", "io2"]
