"""Reports of several processes: the process table, pooled thread lines, the top frame that fits
80×24, and the JSON `processes` list."""

import json

from gilty.report.recording import json as json_report
from gilty.report.recording import text as console
from gilty.report.recording import text_processes as console_processes
from gilty.sampling.processes import ProcessTracker, roles, roles_of
from gilty.sampling.session import Recording, Session
from synthetic import HOLD, IDLE, WAIT, BatchBuilder, target


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
    tracker.add(
        {
            "events": [{"kind": "skipped", "pid": 999, "ppid": 100, "t": 0.1, "reason": "pid 999 is a zombie"}],
            "batches": {},
            "finished": False,
        }
    )
    tracker.finish(0.5, "duration")
    return rec


def _attached(pid, ppid, cmdline):
    t = target(pid)
    return {
        "kind": "attached",
        "pid": pid,
        "ppid": ppid,
        "t": 0.0,
        "cmdline": cmdline,
        "python_version": t.python_version,
        "executable": t.executable,
        "switch_interval_s": 0.005,
    }


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
    assert "handler (app.py:7) [holding_gil]" in text


def test_top_frame_fits_80_by_24_and_says_what_is_left_out():
    rec = _recording(workers=12, pool=8)
    frame = console_processes.render_top(rec, 3.0, "hold", 80, 24)
    lines = frame.splitlines()
    assert len(lines) <= 24, frame
    assert max(len(line) for line in lines) <= 80, frame
    more = [line for line in lines if line.startswith("+")]
    assert len(more) == 1 and "more" in more[0], frame
    # py-spy top's table below: functions by own and total time.
    table = lines.index(console_processes.FUNCTIONS_HEADING[:80])
    assert lines[table + 1].split()[:3] == ["100%", "100%", "handler"], frame


def test_top_names_a_busy_thread_by_its_function_in_a_wide_column():
    frame = console_processes.render_top(_server(), 3.0, "hold", 80, 24)
    rows = [line for line in frame.splitlines() if line.startswith("MainThread ")]
    assert sum(r.endswith("handle (views.py:12)") for r in rows) == 2, frame
    # The function column of an 80-column frame holds at least 27 characters (it held 16).
    assert 80 - console_processes.TOP_HEADING.index("TOP FUNCTION") >= 27
    # Narrow: the location goes before the function name is cut.
    fit = console_processes.fit_function
    assert fit("Random._randbelow", "/usr/lib/python3.12/random.py", 239, 33) == "Random._randbelow (random.py:239)"
    assert fit("Random._randbelow", "/usr/lib/python3.12/random.py", 239, 32) == "Random._randbelow (random.py)"
    assert fit("Random._randbelow", "/usr/lib/python3.12/random.py", 239, 28) == "Random._randbelow"
    assert fit("Random._randbelow", "/usr/lib/python3.12/random.py", 239, 10) == "Random._r~"


def test_top_sort_by_wait_puts_the_waiting_process_first():
    rec = _recording(workers=2, pool=0)
    b = BatchBuilder(names={300: "waiter"})
    ProcessTracker(rec).add(
        {"events": [_attached(300, 100, "other")], "batches": {300: b.batch([{300: WAIT}] * 50)}, "finished": False}
    )
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


# -- the first screen of a server's report (issue 16) -------------------------------------------

VENV_CMD = (
    "/srv/v-httpbin/bin/python /srv/v-httpbin/bin/gunicorn httpbin:app -w 2 -k uvicorn.workers.UvicornWorker " + "--x " * 40
)


def _server(late: int = 0):
    """A master sleeping in `wait`, two workers whose MainThread holds the GIL 78 % in `handle`
    and sleeps 22 % in `select`, each with eight idle AnyIO threads."""
    rec = Recording(rate_hz=100.0, start_time=1_700_000_000.0)
    rec.subprocesses = True
    events = [_attached(100, 1, VENV_CMD)] + [_attached(pid, 100, VENV_CMD) for pid in (101, 102)]
    batches = {}
    b = BatchBuilder(names={100: "MainThread"})
    batches[100] = b.batch([{100: (IDLE, b.stack(("SyncWorker.wait", "/srv/gunicorn/workers/sync.py", 35)))}] * 100)
    for pid in (101, 102):
        names = {pid: "MainThread", **{pid * 100 + i: "AnyIO worker thread" for i in range(8)}}
        b = BatchBuilder(names=names)
        handle = b.stack(("handle", "/srv/app/views.py", 12), ("run", "/srv/uvicorn/server.py", 60))
        wait = b.stack(("select", "/usr/lib/python3.12/selectors.py", 468), ("run", "/srv/uvicorn/server.py", 60))
        rows = []
        for i in range(100):
            main = (HOLD, handle) if i % 50 < 39 else (IDLE, wait)
            rows.append({pid: main, **{pid * 100 + k: IDLE for k in range(8)}})
        batches[pid] = b.batch(rows)
    ProcessTracker(rec).add({"events": events, "batches": batches, "finished": False})
    for s in rec.sessions:
        s.errors["late"] = late
        s.duration_s = 1.0 if not late else (s.samples + late) / 100.0
    rec.duration_s = 1.0
    return rec


def test_process_row_gives_the_busiest_threads_shares_not_an_average():
    text = console.render_recording(_server())
    lines = text.splitlines()
    table = lines.index(console_processes.PROCESS_HEADING)
    row = lines[table + 2]
    assert row.split()[:2] == ["101", "worker"]
    # MainThread held 78 %; averaged over the nine threads it would read 9 % held, 91 % idle.
    assert "MainThread" in row and " 78% " in row and " 22% " in row, row


def test_top_function_is_what_a_busy_worker_runs_not_where_it_sleeps():
    text = console.render_recording(_server())
    main_rows = [line for line in text.splitlines() if line.startswith("  MainThread ")]
    workers = [r for r in main_rows if "handle (views.py:12)" in r]
    assert len(workers) == 2, main_rows
    assert all("select" not in r for r in workers)
    # The master, idle all the time, is still named by where it sleeps.
    assert any("SyncWorker.wait (sync.py:35) [idle]" in r for r in main_rows)


def test_report_has_top_functions_and_a_headline_first():
    text = console.render_recording(_server())
    lines = text.splitlines()
    assert lines[1].startswith("Busiest: pid 101 (worker) MainThread (tid 101): GIL held 78%"), lines[1]
    assert lines[2] == "  mostly in handle (views.py:12) [holding_gil]"
    start = next(i for i, line in enumerate(lines) if line.startswith("Top functions"))
    first = lines[start + 2]
    assert first.split()[:2] == ["156", "100%"] and first.split()[6:9] == ["2", "workers", "handle"], first
    # Idle samples are not functions worth reading: the master's wait is not in the section.
    section = "\n".join(lines[start : start + 6])
    assert "SyncWorker.wait" not in section and "select" not in section
    # The first screen (24 lines) has the headline, the process table and the top function.
    first_screen = "\n".join(lines[:24])
    assert "Top functions" in first_screen and "handle (views.py:12)" in first_screen


def test_every_line_fits_120_and_commands_tell_roles_apart():
    rec = _server()
    rec.notes.append("a very long hint " * 20)
    text = console.render_recording(rec)
    widths = [len(line) for line in text.splitlines()]
    assert max(widths) <= console_processes.REPORT_WIDTH, max(widths)
    table = text.splitlines().index(console_processes.PROCESS_HEADING)
    rows = text.splitlines()[table + 1 : table + 4]
    assert [r.split()[1] for r in rows] == ["master", "worker", "worker"]
    # The virtualenv's path is not what tells processes apart: the script and its arguments are.
    assert all("python gunicorn httpbin:app -w 2" in r for r in rows), rows
    assert console_processes.short_command("/usr/bin/python3.11 -m uvicorn app:app") == "python -m uvicorn app:app"


def test_missed_passes_warn_with_the_effective_rate():
    assert "effective rate" not in console.render_recording(_server())
    text = console.render_recording(_server(late=100))
    warnings = [line for line in text.splitlines() if line.startswith("warning: pid")]
    assert len(warnings) == 3 and "effective rate 50 Hz of 100 Hz" in warnings[0], warnings


def test_compare_keeps_roles_apart_and_names_functions():
    from gilty.load.run_diff import compare_recordings

    rows = compare_recordings(_server(), _server())
    scopes = {r.scope for r in rows}
    # The master's MainThread sleeps, the workers' run: one row each, not one "thread MainThread".
    assert "master thread MainThread" in scopes and "worker thread MainThread" in scopes
    assert "thread MainThread" not in scopes
    # GIL utilisation per role beside the whole recording's: the workers' 78 %, not the mean with the master.
    util = {r.scope: r.a for r in rows if r.metric == "gil_utilisation"}
    assert abs(util["role worker"] - 0.78) < 1e-6 and abs(util["recording"] - 0.52) < 1e-6, util
    assert "role master" not in util  # the master never held it: under the 1 % every row needs
    # The same recording twice: no function moved, nothing beyond noise.
    assert not [r for r in rows if r.beyond_noise]


def test_compare_text_says_too_noisy_rather_than_a_share_over_100_percent():
    from gilty.load.run_diff import Row
    from gilty.report.compare import text as compare_report

    rows = [
        Row("worker thread MainThread", "holding_gil", 0.30, 0.35, 0.05, 2.926, False),
        Row("recording", "gil_utilisation", 0.30, 0.35, 0.05, 0.02, True),
    ]
    text = compare_report.render_text("a.json", "b.json", "recording", rows)
    assert "292.6 %" not in text and ">100 %" in text
    assert "2.0 %" in text  # a noise under 100 % is printed as it is


def test_compare_has_a_cpu_wait_row_when_a_run_waited_for_a_cpu():
    from gilty.load.run_diff import recording_figures

    cpu_wait = 6
    b = BatchBuilder(names={1: "worker"})
    session = Session(target(pid=7), 100.0, start_time=1_700_000_000.0)
    session.add_batch({"times": [i / 100 for i in range(300)], **b.batch([{1: HOLD}] * 100 + [{1: cpu_wait}] * 200)})
    figures = recording_figures(Recording([session], rate_hz=100.0))
    share, per_second = figures[("thread worker", "cpu_wait")]
    assert round(share, 3) == round(200 / 300, 3)
    assert per_second == [0.0, 1.0, 1.0]


def test_commands_cut_alike_show_what_tells_them_apart():
    base = "python -m celery -A proj.tasks.application worker --loglevel=info --concurrency=4 --hostname=w1 -Q "
    commands = [base + "mail", base + "billing", "python manage.py runserver"]
    shown = console_processes.tell_apart(commands, 45)
    assert all(len(s) <= 45 for s in shown), shown
    assert shown[0] != shown[1] and shown[0].endswith("…-Q mail") and shown[1].endswith("…-Q billing"), shown
    assert shown[0].startswith("python -m celery")
    assert shown[2] == "python manage.py runserver"
    # Identical commands (forked workers) and commands that fit stay as they are.
    assert console_processes.tell_apart([base + "mail"] * 2, 45) == [base[:44] + "~"] * 2
    # In the report: the process table's rows differ where the commands do.
    rec = _recording(workers=2)
    for s, queue in zip(rec.sessions[1:], ("mail", "billing")):
        s.target.cmdline = base + queue
    text = console.render_recording(rec)
    heading = text.splitlines().index(console_processes.PROCESS_HEADING)
    rows = text.splitlines()[heading + 2 : heading + 4]
    assert rows[0].endswith("-Q mail") and rows[1].endswith("-Q billing"), rows
    assert max(len(line) for line in text.splitlines()) <= console_processes.REPORT_WIDTH


def test_roles_of_spawned_workers_differ_only_in_numbers():
    # uvicorn --workers 2: multiprocessing's spawn gives each worker its own pipe handle; the
    # resource tracker is another kind of child.
    spawn = "/v/bin/python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd={}, pipe_handle={}) --multiprocessing-fork"
    members = [
        (10, 1, "/v/bin/python -m uvicorn app:app --workers 2"),
        (11, 10, "/v/bin/python -c from multiprocessing.resource_tracker import main;main(4)"),
        (12, 10, spawn.format(5, 7)),
        (13, 10, spawn.format(5, 9)),
        (20, 1, "/v/bin/python pool.py"),
        (21, 20, spawn.format(3, 8)),
        (30, 1, "/v/bin/python main.py"),
        (31, 30, "/usr/bin/git status 1"),
        (32, 30, "/usr/bin/git log 2"),
    ]
    assert roles_of(members) == {
        10: "master",
        11: "child",
        12: "worker",
        13: "worker",
        20: "master",
        21: "worker",
        30: "master",
        31: "child",
        32: "child",
    }
