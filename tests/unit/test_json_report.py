"""The JSON report and snapshot: every documented key present, every present key documented."""

import json
import math
import pathlib
import re

from gilty.report.dump import json as dump_json
from gilty.report.recording import json as json_report
from synthetic import CLOCK_NANOSLEEP, FUTEX, HOLD, IDLE, BatchBuilder, contention_session, make_session, syscall_name

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "json-format.md"
# Objects whose keys are data (syscall names, idle kinds), not part of the format.
MAPS = {
    "threads[].idle_syscalls",
    "threads[].idle_kinds",
    "threads[].exact.wait.log2_hist_ns",
    "threads[].exact.hold.log2_hist_ns",
    "gc_exact.by_generation.*.log2_hist_ns",
    "recording",  # the session format, versioned by its own recording_format_version
}


def documented_keys(section_title: str) -> set:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"## {section_title}", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def key_paths(value, prefix="") -> set:
    paths = set()
    if prefix == "gc_exact.by_generation" and isinstance(value, dict):
        # Keys are generations (data): document one pattern for all of them.
        for child in value.values():
            paths |= key_paths(child, prefix + ".*")
        paths.add(prefix)
        return paths
    if isinstance(value, dict) and prefix not in MAPS:
        for key, child in value.items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            paths |= key_paths(child, path)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for item in value:
            paths |= key_paths(item, prefix + "[]")
    return paths


def under_empty_lists(documented: set, present: set) -> set:
    """Documented keys of list items where the report's list is empty or null (free_threading.pools
    of a process without pools, its modules when not read): absent by nature."""
    out = set()
    for key in documented:
        parts = key.split("[].")
        for i in range(1, len(parts)):
            head = "[].".join(parts[:i]) + "[]."
            if head.startswith("free_threading.") and not any(p.startswith(head) for p in present):
                out.add(key)
    return out


def test_report_keys_match_the_documentation():
    session, _ = contention_session()
    report = json.loads(json_report.render(session))
    documented = documented_keys("Report")
    present = key_paths(report)
    assert documented, "no keys parsed from docs/json-format.md"
    assert documented - present - under_empty_lists(documented, present) == set(), "documented but missing from the report"
    assert present - documented == set(), "in the report but not documented"


def _recording_keys(report: dict) -> set:
    """Key paths of a recording report; each ``processes[]`` entry is a Report, checked apart."""
    paths = key_paths({k: v for k, v in report.items() if k != "processes"})
    paths.add("processes")
    for entry in report["processes"]:
        paths |= key_paths({"process": entry["process"]}, "processes[]")
    return paths


def test_recording_report_keys_match_the_documentation():
    from gilty.sampling.session import Recording
    from test_console_processes import _recording

    for recording in (_recording(exited_worker=104), Recording.of(contention_session()[0])):
        report = json.loads(json_report.render_recording(recording))
        documented = documented_keys("Report") | documented_keys("Several processes")
        present = _recording_keys(report)

        # Keys of list items can only be present when the list has items (skipped, gates).
        def under_an_empty_list(key: str) -> bool:
            parts = key.split("[].")
            return any(not any(p.startswith("[].".join(parts[:i]) + "[].") for p in present) for i in range(1, len(parts)))  # noqa: B023 - called within its iteration

        empty_lists = {k for k in documented if "[]." in k and under_an_empty_list(k)}
        # An object documented as "object or null" (saturation, for sessions without scheduler counters)
        # has no keys when null.
        under_null = {k for k in documented if "." in k and "[]" not in k and report.get(k.split(".")[0], {}) is None}
        assert documented - present <= empty_lists | under_null, "documented but missing from the report"
        assert present - documented == set(), "in the report but not documented"
        for entry in report["processes"]:
            assert key_paths({k: v for k, v in entry.items() if k != "process"}) <= documented_keys("Report")


def test_report_values():
    session, _ = contention_session()
    report = json_report.report(session)
    assert report["format_version"] == 1
    assert report["target"] == {"pid": 4242, "python_version": "3.12.1", "executable": "/usr/bin/python3.12"}
    assert report["samples"] == 400
    assert report["switch_interval_s"] == 0.005
    assert report["partial"] is False and report["partial_reason"] is None
    assert set(report["errors"]) == {"torn_retried", "torn_dropped", "torn_partial", "read_failed", "late"}
    # Sorted by GIL-holding samples: metrics first.
    assert [t["name"] for t in report["threads"]] == ["metrics", "io-1", "MainThread", "io-2"]
    for t in report["threads"]:
        assert math.isclose(sum(t["states"].values()), 1.0, abs_tol=1e-5)
    main = next(t for t in report["threads"] if t["name"] == "MainThread")
    assert main["idle_syscalls"] == {"futex": 1.0}
    assert main["idle_kinds"] == {"lock wait": 1.0}
    io1 = next(t for t in report["threads"] if t["name"] == "io-1")
    assert io1["blame"][0]["holder_name"] == "metrics" and io1["blame"][0]["holder_function"] == "spin"
    assert io1["convoy"]["is_convoy"] is True
    assert "contention" in report["verdict_kinds"]


def test_partial_report():
    b = BatchBuilder()
    session = make_session([b.batch([{1: HOLD}] * 5, exited=True)])
    session.mark_partial("pid 4242 exited after 0.1 s of the requested 5 s")
    report = json_report.report(session)
    assert report["partial"] is True
    assert report["partial_reason"].startswith("pid 4242 exited")


def test_empty_report_is_valid_json():
    report = json.loads(json_report.render(make_session([])))
    assert report["samples"] == 0 and report["threads"] == [] and report["verdict_kinds"] == ["empty"]


def _snapshot():
    return {
        "t": 0.0,
        "threads": [
            {
                "tid": 1,
                "name": "MainThread",
                "state": IDLE,
                "syscall": FUTEX,
                "stack": [("wait", "threading.py", 320), ("main", "app.py", 9)],
                "handling_exception": "ValueError",
            },
            {"tid": 2, "name": "metrics", "state": HOLD, "syscall": -1, "stack": [("spin", "app.py", 12)]},
            {"tid": 3, "name": "sleeper", "state": IDLE, "syscall": CLOCK_NANOSLEEP, "stack": []},
        ],
    }


def _tasks():
    """What `Target.tasks()` hands over for a loop with a parent task awaiting a sleeping child."""
    stack = [("sleep", "/usr/lib/python3.12/asyncio/tasks.py", 665), ("child", "app.py", 5)]
    return {
        "asyncio_imported": True,
        "other_frameworks": [],
        "loops": [{"address": 0x1000, "type": "_UnixSelectorEventLoop", "thread_ident": 77, "tid": 1, "running_task": None}],
        "tasks": [
            {
                "id": 0x2000,
                "name": "Task-1",
                "state": "pending",
                "loop": 0x1000,
                "python_impl": False,
                "eager": False,
                "stack": [("main", "app.py", 9)],
                "awaiting": {"kind": "task", "type": "_asyncio.Task", "address": 0x3000},
                "parent": None,
                "parent_via": None,
            },
            {
                "id": 0x3000,
                "name": "child",
                "state": "pending",
                "loop": 0x1000,
                "python_impl": False,
                "eager": False,
                "stack": stack,
                "awaiting": {"kind": "sleep", "type": "_asyncio.Future", "address": 0x4000},
                "parent": 0x2000,
                "parent_via": "await",
            },
        ],
        "errors": {"torn_dropped": 0, "unreadable": 0, "changed": 0},
        "pages_read": 12,
    }


TARGET_INFO = {"pid": 4242, "python_version": "3.12.1", "executable": "/usr/bin/python3", "switch_interval_s": 0.005}


def _snapshot_with_locals():
    """As `Target.dump(locals=True)` gives it: per frame (variables, None) or (None, error); a
    thread whose stack kept moving has `locals_error` instead."""
    snap = _snapshot()
    main, metrics, _ = snap["threads"]
    main["locals"] = [([("self", True, "<Condition at 0x7f00>"), ("waiter", False, "None")], None), (None, "bad code object")]
    metrics["locals_error"] = "the stack moved while its variables were read"
    main["positions"] = [(320, 320, 8, 30), None]
    snap["threads"][2]["positions_error"] = "the stack kept moving"
    return snap


def test_dump_keys_match_the_documentation():
    documented = documented_keys("Snapshot")
    plain = key_paths(json.loads(dump_json.render_json(TARGET_INFO, _snapshot(), syscall_name)))
    # Without --tasks, --locals, positions or --native: every documented key except those.
    optional = (
        "asyncio",
        "threads[].locals_error",
        "threads[].positions_error",
        "threads[].stack[].locals",
        "threads[].stack[].position",
        "threads[].native_",
        "errors",
        "target.core",
        "diagnosis",
        "threads[].waiting_for_lock",
        "threads[].stack_error",
    )
    assert {k for k in documented if not k.startswith(optional)} - plain == set()
    assert plain - documented == set()
    full = dict(_snapshot_with_locals(), tasks=_tasks())
    # --native: one thread merged (a C frame over its Python frame), one without its native part.
    full["threads"][0] = dict(
        full["threads"][0],
        native_stack=[("c", "pthread_cond_wait", "/lib/libc.so.6", 0x1234, None, None), ("py", "wait", "threading.py", 320)],
    )
    full["threads"][1] = dict(full["threads"][1], native_error="the Python stack moved around every kernel sample (3 tries)")
    # --core: the core file, the verdicts, the lock a thread waits for.
    full["diagnosis"] = ["deadlock: all 2 Python threads wait to acquire locks and none holds the GIL: ..."]
    lock = {"address": 0x7F0000001000, "type": "_thread.lock", "locked": True, "owner_tid": None}
    full["threads"][2] = dict(full["threads"][2], waiting_for_lock=lock, stack_error="reading its frames from the core failed")
    core_info = dict(TARGET_INFO, core="/var/tmp/core.4242")
    present = key_paths(json.loads(dump_json.render_json(core_info, full, syscall_name)))
    assert documented - present == set()
    assert present - documented == set()


def test_dump_locals_values():
    dump = json_report.dump_report(TARGET_INFO, _snapshot_with_locals(), syscall_name)
    main, metrics, _ = dump["threads"]
    assert main["stack"][0]["locals"] == [
        {"name": "self", "arg": True, "repr": "<Condition at 0x7f00>"},
        {"name": "waiter", "arg": False, "repr": "None"},
    ]
    assert main["stack"][1]["locals"] is None and main["stack"][1]["locals_error"] == "bad code object"
    assert main["stack"][0]["position"] == {"line": 320, "end_line": 320, "column": 8, "end_column": 30}
    assert main["stack"][1]["position"] is None
    assert metrics["locals_error"].startswith("the stack moved") and "locals" not in metrics["stack"][0]


def test_dump_locals_text():
    from gilty.report.dump import text as dump_text

    out = dump_text.render_text(TARGET_INFO, _snapshot_with_locals(), syscall_name).splitlines()
    at = out.index("    wait (threading.py:320)")
    assert out[at + 1 : at + 6] == [
        "        Arguments:",
        "            self: <Condition at 0x7f00>",
        "        Locals:",
        "            waiter: None",
        "    main (app.py:9)",
    ], out
    assert out[at + 6] == "        (variables not read: bad code object)", out
    assert "    (variables not read: the stack moved while its variables were read)" in out, out
    assert out[2].endswith("(idle: lock wait (futex); handling ValueError)"), out[2]


def test_dump_tasks_text_tree():
    from gilty.report.dump import text as dump_report

    text = dump_report.render_text(TARGET_INFO, dict(_snapshot(), tasks=_tasks()), syscall_name)
    assert "Event loop 0x1000 (_UnixSelectorEventLoop) on thread 1 'MainThread': 2 task(s)" in text
    assert "Task-1 [pending] 0x2000: awaiting task child at main (app.py:9)" in text
    assert "└─ child [pending] 0x3000 via await: awaiting sleep at child (app.py:5)" in text


def test_dump_values():
    dump = json_report.dump_report(TARGET_INFO, _snapshot(), syscall_name)
    main, metrics, sleeper = dump["threads"]
    assert main["state"] == "idle" and main["syscall"] == "futex" and main["idle_kind"] == "lock wait"
    assert main["stack"][0] == {"function": "wait", "file": "threading.py", "line": 320}
    assert metrics["state"] == "holding_gil" and metrics["syscall"] is None and metrics["idle_kind"] is None
    assert main["handling_exception"] == "ValueError" and metrics["handling_exception"] is None
    assert sleeper["idle_kind"] == "sleep" and sleeper["stack"] == []


def _distribution(values_ns):
    values_ns = sorted(values_ns)
    hist = {}
    for v in values_ns:
        lo = 1 << (v.bit_length() - 1) if v else 0
        hist[lo] = hist.get(lo, 0) + 1
    pick = lambda q: values_ns[max(1, -(-q * len(values_ns) // 100)) - 1] / 1e9  # noqa: E731
    return {
        "count": len(values_ns),
        "total_s": sum(values_ns) / 1e9,
        "p50_s": pick(50),
        "p90_s": pick(90),
        "p99_s": pick(99),
        "max_s": values_ns[-1] / 1e9,
        "log2_hist_ns": hist,
    }


def exact_session():
    """The contention session with an exact summary shaped like ``Sampler.exact_summary()``."""
    session, _builder = contention_session()
    metrics, io1 = 2, 3  # the tids contention_session gives 'metrics' and 'io-1'
    spin_frame = next(fid for fid, frame in session.frames.items() if frame[0] == "spin")
    session.exact = {
        "wall_s": 2.0,
        "start_s": 0.0,
        "events": 900,
        "lost": 0,
        "threads_attached": 4,
        "symbols": ["take_gil", "drop_gil", "gc_collect_main"],
        "threads": {
            metrics: {
                "hold": _distribution([5_000_000] * 300),
                "wait": _distribution([3_000] * 300),
                "acquisitions": 300,
                "forced_switches": 0,
                "handoff_s": 0.04,
                "blame": [],
            },
            io1: {
                "hold": _distribution([50_000] * 100),
                "wait": _distribution([5_100_000] * 100),
                "acquisitions": 100,
                "forced_switches": 100,
                "handoff_s": 0.0,
                "blame": [{"holder_tid": metrics, "wait_s": 0.5, "functions": [(spin_frame, 40)]}],
            },
        },
        "collections": [{"tid": metrics, "generation": 2, "start_s": 0.5, "duration_s": 0.01, "collected": 100, "open": False}],
        "gc_by_generation": {"2": _distribution([10_000_000])},
    }
    return session


def test_exact_keys_match_the_documentation():
    session = exact_session()
    report = json.loads(json_report.render(session))
    documented = documented_keys("Report") | documented_keys("Exact mode")
    present = key_paths(report)
    assert documented - present - under_empty_lists(documented, present) == set(), "documented but missing from the report"
    assert present - documented == set(), "in the report but not documented"


def test_exact_values_are_fractions_of_traced_wall_time():
    session = exact_session()
    report = json_report.report(session)
    io1 = next(t for t in report["threads"] if t["name"] == "io-1")
    assert math.isclose(io1["exact"]["wait_s"], 0.51)
    assert math.isclose(io1["exact"]["wait_fraction"], 0.255)
    assert io1["exact"]["wait"]["p50_s"] == 0.0051
    metrics = next(t for t in report["threads"] if t["name"] == "metrics")
    assert math.isclose(metrics["exact"]["handoff_fraction"], 0.02)
    assert io1["exact"]["blame"][0]["holder_name"] == "metrics"
    assert io1["exact"]["blame"][0]["holder_function"] == "spin"
    assert report["gc_exact"]["collections"][0]["generation"] == 2
    assert math.isclose(report["gc_exact"]["gc_fraction"], 0.005)
    assert report["exact_overhead"]["events_per_s"] == 450
    main = next(t for t in report["threads"] if t["name"] == "MainThread")
    assert main["exact"] is None  # no events for it
