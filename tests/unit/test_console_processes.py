"""Reports of several processes: the process table, pooled thread lines, the top frame that fits
80×24, and the JSON `processes` list."""

import json

from synthetic import HOLD, IDLE, WAIT, BatchBuilder, target

from gilty.sampling.processes import ProcessTracker, roles
from gilty.report import console, console_processes, json_report
from gilty.sampling.session import Recording, Session


def _recording(workers=4, pool=8, exited_worker=None):
    """A master (idle) with ``workers`` forked workers, each a busy main thread and a pool."""
    rec = Recording(rate_hz=100.0, start_time=1_700_000_000.0)
    rec.subprocesses = True
    events = [_attached(100, 1, "gunicorn: master [app]")]
    for w in range(workers):
        events.append(_attached(101 + w, 100, "gunicorn: master [app]"))
    tracker = ProcessTracker(rec)
    builders = {}
    batches = {}
    b = BatchBuilder(names={100: "MainThread"})
    batches[100] = b.batch([{100: (IDLE, b.stack(("sleep", "/srv/arbiter.py", 1)))}] * 50)
    for w in range(workers):
        pid = 101 + w
        names = {pid: "MainThread", **{pid * 100 + i: "AnyIO worker thread" for i in range(pool)}}
        b = builders[pid] = BatchBuilder(names=names)
        handler = b.stack(("handler", "/srv/app.py", 7))
        row = {pid: (HOLD, handler), **{pid * 100 + i: IDLE for i in range(pool)}}
        batches[pid] = b.batch([row] * 50)
    tracker.add({"events": events, "batches": batches, "finished": False})
    if exited_worker is not None:
        tracker.add({"events": [{"kind": "exited", "pid": exited_worker, "t": 0.4}], "batches": {}, "finished": False})
    tracker.add({"events": [{"kind": "skipped", "pid": 999, "ppid": 100, "t": 0.1, "reason": "pid 999 is a zombie"}],
                 "batches": {}, "finished": False})
    tracker.finish(0.5, "duration")
    return rec


def _attached(pid, ppid, cmdline):
    t = target(pid)
    return {"kind": "attached", "pid": pid, "ppid": ppid, "t": 0.0, "cmdline": cmdline,
            "python_version": t.python_version, "executable": t.executable, "switch_interval_s": 0.005}


def test_roles_master_and_forked_workers():
    rec = _recording()
    assert roles(rec) == {100: "master", 101: "worker", 102: "worker", 103: "worker", 104: "worker"}


def test_text_report_has_a_process_table_then_pooled_threads():
    rec = _recording(exited_worker=104)
    text = console.render_recording(rec)
    lines = text.splitlines()
    table = lines.index(console_processes.PROCESS_HEADING)
    rows = lines[table + 1 : table + 6]
    assert [int(r.split()[0]) for r in rows] == [100, 101, 102, 103, 104]
    assert "master" in rows[0] and "worker" in rows[1]
    assert "exited at 0.4 s" in rows[4]
    assert "skipped pid 999: pid 999 is a zombie" in text
    # One line per pool, not eight: issue 7.
    assert text.count("AnyIO worker thread ×8") == 4
    assert text.count("AnyIO worker thread ") == 4
    assert console_processes.POOL_NOTE in text
    assert "handler (/srv/app.py:7)" in text


def test_top_frame_fits_80_by_24_and_says_what_is_left_out():
    rec = _recording(workers=12, pool=8)
    frame = console_processes.render_top(rec, 3.0, "hold", 80, 24)
    lines = frame.splitlines()
    assert len(lines) <= 24, frame
    assert max(len(line) for line in lines) <= 80, frame
    assert lines[-1].startswith("+"), frame
    assert "more" in lines[-1]


def test_top_sort_by_wait_puts_the_waiting_process_first():
    rec = _recording(workers=2, pool=0)
    b = BatchBuilder(names={300: "waiter"})
    ProcessTracker(rec).add({"events": [_attached(300, 100, "other")],
                             "batches": {300: b.batch([{300: WAIT}] * 50)}, "finished": False})
    frame = console_processes.render_top(rec, 1.0, "wait", 80, 24)
    first_process = next(line for line in frame.splitlines() if line.startswith("pid "))
    assert first_process.startswith("pid 300"), frame


def test_json_has_processes_and_merged_figures():
    rec = _recording(exited_worker=104)
    report = json.loads(json_report.render_recording(rec))
    assert [p["process"]["pid"] for p in report["processes"]] == [100, 101, 102, 103, 104]
    assert report["processes"][4]["process"]["exited"] is True
    assert report["processes"][4]["process"]["exited_at_s"] == 0.4
    assert report["processes"][0]["process"]["role"] == "master"
    assert report["subprocesses"] is True
    assert report["skipped"][0]["pid"] == 999
    # Merged: workers hold the GIL all the time, the master never: 4 of 5 processes by samples.
    assert abs(report["gil_utilisation"] - 0.8) < 1e-6
    assert {t["pid"] for t in report["threads"]} == {100, 101, 102, 103, 104}


def test_single_process_json_keeps_its_shape():
    b = BatchBuilder(names={1: "main"})
    s = Session(target(), 100.0)
    s.add_batch(b.batch([{1: HOLD}] * 10))
    single = json_report.report(s)
    via_recording = json_report.recording_report(Recording.of(s))
    for key, value in single.items():
        if key != "threads":
            assert via_recording[key] == value, key
    assert via_recording["threads"] == single["threads"]
    assert len(via_recording["processes"]) == 1
