"""`gilty serve`'s series a fleet can afford: short process names, roles, thread pools folded into
one series each, and per-process GIL / GC figures, from batches shaped like the sampler's."""

import re

from gilty.observe.series_keys import ThreadKeys, process_name
from gilty.observe.sidecar import Totals
from synthetic import GC, HOLD, IDLE, WAIT, BatchBuilder

RATE = 10.0


def series(text: str) -> list:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def thread_labels(text: str) -> set:
    return set(re.findall(r"gilty_gil_hold_seconds_total\{([^}]*)\}", text))


def test_short_process_names():
    assert process_name("/srv/.venv/bin/python3.12 /srv/.venv/bin/gunicorn -w 4 -b 0.0.0.0:80 app:app") == "gunicorn"
    assert process_name("gunicorn: worker [app:app]") == "gunicorn"
    assert process_name("python -X dev -m uvicorn app:app --workers 4") == "uvicorn"
    assert process_name("/usr/bin/python3 -u /opt/jobs/nightly_import.py --all") == "nightly_import"
    assert process_name("python3 -c from multiprocessing.spawn import spawn_main; spawn_main()") == "python"
    assert process_name("") == "python"


def test_numbered_pools_fold_from_their_third_name_and_same_names_are_one_series():
    keys = ThreadKeys()
    assert keys.key("spinner-0") == ("spinner-0", [])
    assert keys.key("spinner-1") == ("spinner-1", [])  # two numbered threads stay apart, as in the report
    assert keys.key("spinner-2") == ("spinner-#", ["spinner-0", "spinner-1"])
    assert keys.key("spinner-0") == ("spinner-#", [])
    assert keys.key("AnyIO worker thread") == ("AnyIO worker thread", [])


def test_names_the_interpreter_numbers_are_a_pool_from_the_first():
    """A worker starting a one-off thread per request shows two or three of them per scrape and an
    unnamed newcomer or two: those must not be a series each until a third name shows up."""
    keys = ThreadKeys()
    assert keys.key("Thread-11 (_one_off)") == ("Thread-# (_one_off)", [])
    assert keys.key("Thread-12 (_one_off)") == ("Thread-# (_one_off)", [])
    assert keys.key("Thread-3") == ("Thread-#", [])
    assert keys.key("ThreadPoolExecutor-0_1") == ("ThreadPoolExecutor-#_#", [])
    assert keys.key("thread-12155") == ("thread-#", [])
    assert keys.key("Dummy-2") == ("Dummy-#", [])
    # A name of the application's that merely looks alike keeps its own series until its pool forms.
    assert keys.key("Thread-11 worker") == ("Thread-11 worker", [])
    assert keys.key("io1") == ("io1", [])


def test_series_per_process_are_capped():
    keys = ThreadKeys(max_series=3)
    got = [keys.key(name)[0] for name in ("a", "b", "c", "d", "e")]
    assert got == ["a", "b", "c", ThreadKeys.OTHER, ThreadKeys.OTHER]


def _churn(totals: Totals, pid: int, builder: BatchBuilder, rounds: int, first_tid: int) -> None:
    """Every round a pool of 4 threads with new tids and new numbers (ThreadPoolExecutor-0_N,
    Thread-N (worker)), as executors and one-off threads do under load."""
    for r in range(rounds):
        tids = [first_tid + 10 * r + i for i in range(4)]
        for i, tid in enumerate(tids):
            builder.names[tid] = f"ThreadPoolExecutor-0_{4 * r + i}" if i < 3 else f"Thread-{r + 7} (worker)"
        builder.names[pid] = "MainThread"
        totals.add(pid, builder.batch([{pid: HOLD, **{t: WAIT for t in tids}}, {pid: GC, **{t: IDLE for t in tids}}]))


def test_churning_pools_and_respawned_workers_keep_the_series_bounded():
    live: dict = {}
    totals = Totals(1.0 / RATE, threads_of=lambda pid: live.get(pid, set()), memory_of=lambda pid: None)
    master = 100
    totals.attached(master, "python /venv/bin/gunicorn -w 2 app:app")
    counts = []
    for generation in range(6):  # every worker replaced 6 times (--max-requests)
        workers = [1000 + 10 * generation + w for w in range(2)]
        for w in workers:
            totals.attached(w, "python /venv/bin/gunicorn -w 2 app:app", ppid=master)
            _churn(totals, w, BatchBuilder(RATE), rounds=20, first_tid=100_000 * w)
        counts.append(len(series(totals.exposition())))
        for w in workers:
            totals.exited(w)
    # 3 processes: the same figure after every generation, not growing with threads or respawns.
    assert len(set(counts)) == 1, counts
    text = totals.exposition()
    totals.attached(2000, "python /venv/bin/gunicorn -w 2 app:app", ppid=master)
    _churn(totals, 2000, BatchBuilder(RATE), rounds=20, first_tid=7_000_000)
    text = totals.exposition()
    labels = thread_labels(text)
    assert 'pid="2000",role="worker",process="gunicorn",thread="ThreadPoolExecutor-#_#"' in labels
    assert 'pid="2000",role="worker",process="gunicorn",thread="Thread-# (worker)"' in labels
    assert 'pid="2000",role="worker",process="gunicorn",thread="MainThread"' in labels
    assert len([x for x in labels if 'pid="2000"' in x]) == 3
    assert "tid=" not in text and "cmdline" not in text
    # The master stayed a master while it had no live worker.
    assert 'gilty_process_up{pid="100",role="master",process="gunicorn"} 1' in text
    # 20 rounds × 3 pool threads × 1 waiting pass, at 10 Hz: the pool's wait is all of theirs.
    assert (
        'gilty_gil_wait_seconds_total{pid="2000",role="worker",process="gunicorn",thread="ThreadPoolExecutor-#_#"} 6.000000'
        in text
    )


def test_per_thread_keeps_tids_and_ends_the_series_of_ended_threads():
    live = {7: {7, 8}}
    totals = Totals(1.0 / RATE, threads_of=lambda pid: live.get(pid), per_thread=True, memory_of=lambda pid: None)
    totals.attached(7, "python app.py")
    b = BatchBuilder(RATE, names={7: "MainThread", 8: "ThreadPoolExecutor-0_0"})
    totals.add(7, b.batch([{7: HOLD, 8: WAIT}]))
    text = totals.exposition()
    assert (
        'gilty_gil_wait_seconds_total{pid="7",role="main",process="app",thread="ThreadPoolExecutor-0_0",tid="8"} 0.100000' in text
    )


def test_process_gil_and_gc_figures():
    now = [0.0]
    totals = Totals(1.0 / RATE, clock=lambda: now[0], memory_of=lambda pid: {"private": 5, "shared": 7})
    totals.attached(7, "python app.py")
    b = BatchBuilder(RATE, names={7: "MainThread", 8: "w"})
    # 10 passes: GIL held in 6 (2 of them collecting), free in 4.
    totals.add(7, b.batch([{7: HOLD, 8: WAIT}] * 4 + [{7: GC, 8: WAIT}] * 2 + [{7: IDLE, 8: IDLE}] * 4))
    text = totals.exposition()
    assert 'gilty_process_gil_held_seconds_total{pid="7",role="main",process="app"} 0.600000' in text
    assert 'gilty_process_gc_seconds_total{pid="7",role="main",process="app"} 0.200000' in text
    assert 'gilty_process_gil_utilisation_ratio{pid="7",role="main",process="app"} 0.600000' in text
    assert 'gilty_process_gc_ratio{pid="7",role="main",process="app"} 0.200000' in text
    assert 'gilty_process_private_bytes{pid="7",role="main",process="app"} 5' in text
    # The gauges cover the last UTILISATION_WINDOW_S only.
    now[0] = Totals.UTILISATION_WINDOW_S + 1
    totals.add(7, b.batch([{7: IDLE, 8: IDLE}] * 10))
    text = totals.exposition()
    assert 'gilty_process_gil_utilisation_ratio{pid="7",role="main",process="app"} 0.000000' in text
    assert 'gilty_process_gil_held_seconds_total{pid="7",role="main",process="app"} 0.600000' in text


def test_retitled_and_spawned_workers_are_workers():
    totals = Totals(1.0 / RATE, memory_of=lambda pid: None)
    totals.attached(1, "gunicorn: master [app:app]")
    totals.attached(2, "gunicorn: worker [app:app]", ppid=1)  # setproctitle, the only worker alive
    totals.attached(3, "/venv/bin/python /venv/bin/uvicorn app:app --workers 2")
    totals.attached(4, "/venv/bin/python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)", ppid=3)
    totals.attached(5, "/venv/bin/python -B -c from multiprocessing.resource_tracker import main;main(6)", ppid=3)
    up = [line for line in series(totals.exposition()) if line.startswith("gilty_process_up")]
    assert up == [
        'gilty_process_up{pid="1",role="master",process="gunicorn"} 1',
        'gilty_process_up{pid="2",role="worker",process="gunicorn"} 1',
        'gilty_process_up{pid="3",role="master",process="uvicorn"} 1',
        'gilty_process_up{pid="4",role="worker",process="uvicorn"} 1',
        'gilty_process_up{pid="5",role="child",process="resource_tracker"} 1',
    ]


# Thread and process names the target chose, as `gilty serve` met them (issue 30): a terminal
# showing `curl .../metrics` must act on none of them, and Prometheus's parser must read the page.
HOSTILE_NAMES = [
    "title\x1b]0;owned\x07",
    "clear\x1b[2J",
    "cr\rnul\x00",
    "c1\x9b31m",
    "rtl\u202eevil",
    "zero\u200bwidth\u200d",
    "tag\U000e0041",
    'quote"back\\slash\nnew',
]


def test_hostile_thread_and_process_names_are_escaped_and_parse():
    from prometheus_client.parser import text_string_to_metric_families

    totals = Totals(1.0 / RATE, memory_of=lambda pid: None)
    totals.attached(7, "python /srv/evil\x1b[2J\x07\u202e\u200b.py")
    names = {8 + i: name for i, name in enumerate(HOSTILE_NAMES)}
    b = BatchBuilder(RATE, names=names)
    totals.add(7, b.batch([{tid: HOLD for tid in names}]))
    text = totals.exposition()
    raw = [c for c in "\x1b\x07\r\x00\x9b\u202e\u200b\u200d\U000e0041" if c in text]
    assert not raw, raw
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    threads = {s.labels["thread"] for s in samples if "thread" in s.labels}
    assert {
        "title\\x1b]0;owned\\x07",
        "clear\\x1b[2J",
        "cr\\rnul\\x00",
        "c1\\x9b31m",
        "rtl\\u202eevil",
        "zero\\u200bwidth\\u200d",
        "tag\\U000e0041",
        'quote"back\\slash\\nnew',
    } == threads
    assert {s.labels["process"] for s in samples if "process" in s.labels} == {"evil\\x1b[2J\\x07\\u202e\\u200b"}
