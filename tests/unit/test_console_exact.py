"""The exact section's thread table: a pool's threads keep their numbers when their names are cut."""

import dataclasses

from gilty.report.recording.text_exact import exact_sections
from gilty.sampling.analysis import summarise
from gilty.sampling.analysis.exact import ExactSummary, ExactThread
from synthetic import HOLD, WAIT, BatchBuilder, make_session


def test_pool_rows_keep_their_numbers():
    names = {10 + i: f"ThreadPoolExecutor-0_{i}" for i in range(3)}
    b = BatchBuilder(names=names)
    summary = summarise(make_session([b.batch([{10: HOLD, 11: WAIT, 12: WAIT}] * 50)]))
    dist = {"p50_s": 0.001, "p90_s": 0.002, "p99_s": 0.003, "max_s": 0.004, "count": 0, "log2_hist_ns": {}}
    threads = {
        tid: ExactThread(tid, name, 0.1, 0.0, 0.1, 0.0, 10, 0, 0.0, 0.0, dict(dist), dict(dist)) for tid, name in names.items()
    }
    summary = dataclasses.replace(summary, exact=ExactSummary(1.0, 100, 0, 3, ["take_gil"], threads, [], {}, 0.0))
    rows = [line for line in exact_sections(summary) if line.startswith("ThreadPool")]
    # before: three rows of "ThreadPoolExecutor-~"
    assert len(rows) == 3 and len({r.split()[0] for r in rows}) == 3, rows
    assert rows[0].split()[0].endswith("0_0"), rows
