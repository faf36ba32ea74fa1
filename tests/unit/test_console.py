"""Text renderings: summary, top frame, dump."""

from gilty.report.dump import text as dump_text
from gilty.report.recording import text as console
from synthetic import (
    CLOCK_NANOSLEEP,
    FUTEX,
    HOLD,
    IDLE,
    WAIT,
    BatchBuilder,
    contention_session,
    make_session,
    syscall_name,
)


def test_summary_shows_threads_sections_and_verdict():
    session, _ = contention_session()
    text = console.render(session)
    for name in ("metrics", "io-1", "io-2", "MainThread"):
        assert name in text
    assert "pid 4242, Python 3.12.1" in text
    assert "400 samples" in text
    assert "GIL utilisation 100%" in text
    assert "lock wait (futex) 100%" in text
    blame = text.split("Who held the GIL", 1)[1].split("\n\n", 1)[0]
    assert "  io-2 (tid 4) waits 33% of its samples:\n      67%  metrics (tid 2)\n" in blame
    assert "67%  in spin (app.py:12)" in blame
    assert "33%  io-1 (tid 3)" in blame
    assert "[CONVOY]" in text
    assert "Verdict" in text and "holds the GIL 89% of the time" in text
    assert "PARTIAL" not in text


def test_partial_marker_at_top_and_bottom():
    b = BatchBuilder(names={7: "worker"})
    session = make_session([b.batch([{7: HOLD}] * 3, exited=True)])
    session.mark_partial("pid 4242 exited after 0.0 s of the requested 10 s")
    lines = console.render(session).splitlines()
    assert lines[0] == "*** PARTIAL: pid 4242 exited after 0.0 s of the requested 10 s ***"
    assert lines[-1] == "PARTIAL: pid 4242 exited after 0.0 s of the requested 10 s"
    assert any(line.startswith("worker") for line in lines)


def test_header_counts_errors():
    b = BatchBuilder()
    session = make_session(
        [b.batch([{1: HOLD}], errors={"torn_retried": 4, "torn_dropped": 1, "torn_partial": 3, "read_failed": 2}, late=9)]
    )
    text = console.render(session)
    assert "errors: 4 torn reads retried, 1 dropped, 3 kept to their outer frames, 2 failed reads, 9 late samples" in text


def test_empty_summary():
    text = console.render(make_session([]))
    assert "0 samples" in text and "No samples were recorded." in text


def test_command_is_shown():
    session, _ = contention_session(18)
    session.command = ["python", "app.py"]
    assert "command: python app.py" in console.render(session)


def test_top_frame():
    b = BatchBuilder(names={1: "main", 2: "metrics"})
    spin = b.stack(("spin", "app.py", 12))
    sleep = b.stack(("main", "app.py", 30))
    session = make_session([b.batch([{1: (IDLE, sleep, CLOCK_NANOSLEEP), 2: (HOLD, spin)}] * 3 + [{1: WAIT, 2: (HOLD, spin)}])])
    session.duration_s = 1.0
    text = console.render_top(session, 5.0)
    lines = text.splitlines()
    assert lines[0].startswith("gilty top: pid 4242, Python 3.12.1, 100 Hz, 5 s")
    assert "GIL utilisation 100%" in lines[1]
    metrics = next(line for line in lines if line.startswith("metrics"))
    assert "100%" in metrics and "spin (app.py:12) [holding_gil]" in metrics
    main = next(line for line in lines if line.startswith("main"))
    assert "75%" in main and "25%" in main and "main (app.py:30) [idle]" in main
    # Most GIL-holding thread first.
    assert lines.index(metrics) < lines.index(main)


def test_dump_text():
    snapshot = {
        "t": 0.0,
        "threads": [
            {
                "tid": 1,
                "name": "MainThread",
                "state": IDLE,
                "syscall": FUTEX,
                "stack": [("wait", "threading.py", 320), ("main", "app.py", 9)],
            },
            {"tid": 2, "name": "native-only", "state": 3, "syscall": -1, "stack": []},
        ],
    }
    info = {"pid": 4242, "python_version": "3.12.1", "executable": "/usr/bin/python3"}
    text = dump_text.render_text(info, snapshot, syscall_name)
    assert "Process 4242: Python 3.12.1 (/usr/bin/python3)" in text
    assert "Thread 1 'MainThread' (idle: lock wait (futex))" in text
    assert "    wait (threading.py:320)\n    main (app.py:9)" in text
    assert "Thread 2 'native-only' (native)\n    (no Python stack)" in text


def test_single_process_report_warns_with_the_effective_rate_when_passes_were_missed():
    from gilty.report.recording import text as console
    from synthetic import HOLD, BatchBuilder, make_session

    b = BatchBuilder(names={1: "main"})
    steady = make_session([b.batch([{1: HOLD}] * 100)])
    steady.duration_s = 1.0
    assert "effective rate" not in console.render(steady)
    # `--exact` halving the rate: 100 passes taken of 200 due in 2 s.
    b = BatchBuilder(names={1: "main"})
    late = make_session([b.batch([{1: HOLD}] * 100, late=100)])
    late.duration_s = 2.0
    warning = [line for line in console.render(late).splitlines() if "effective rate" in line]
    assert warning == [
        "warning: pid 4242 missed 100 passes: effective rate 50 Hz of 100 Hz asked "
        "(the sampler could not keep up; lower --rate or record fewer processes)"
    ]
