"""`gilty memory --faults`'s figures on a synthetic ``FaultWatch.stop()`` result: bytes per function
scaled by the sampling period and the lost records, the GC mark, the collapsed stacks, the text table,
the shared HTML page's memory part (escaped), and the JSON keys against docs/memory-faults.md (both ways)."""

from __future__ import annotations

import json
import pathlib
import re

from gilty.memory import faults
from gilty.report.memory import html as memory_html
from gilty.report.memory import json as memory_json
from gilty.report.memory import text as memory_text
from gilty.report.recording import html as html_report
from gilty.sampling.session import Recording
from test_memory_report import default_session
from test_report_html import embedded_data

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "memory-faults.md"
HOSTILE = "</script><b>x"


def raw(period=1, lost=0) -> dict:
    app = ("handle", "/srv/app.py", 12)
    main = ("<module>", "/srv/main.py", 3)
    rows = [
        {"pid": 101, "frames": [app, main], "gc": False, "c_function": "dictiter_iternextvalue", "samples": 300},
        {"pid": 102, "frames": [app, main], "gc": False, "c_function": "_PyEval_EvalFrameDefault", "samples": 100},
        {
            "pid": 101,
            "frames": [("collect", "/srv/app.py", 20), main],
            "gc": True,
            "c_function": "gc_collect_main",
            "samples": 100,
        },
        {"pid": 102, "frames": [(HOSTILE, "/srv/x;y.py", 1)], "gc": False, "c_function": None, "samples": 0},
        {"pid": 102, "frames": [], "gc": False, "c_function": None, "samples": 0},
    ]
    return {
        "period": period,
        "page_size": 4096,
        "method": "pfn",
        "samples": 600,
        "copied": 500,
        "other": 100,
        "no_stack": 0,
        "lost": lost,
        "lag_p50_s": 1e-4,
        "lag_p99_s": 1e-3,
        "lag_max_s": 2e-3,
        "late": 1,
        "elapsed_s": 2.0,
        "cpu_s": 0.2,
        "stack_reads": 8000,
        "stack_failures": 3,
        "workers": [101, 102],
        "errors": [],
        "rows": rows,
    }


def test_bytes_per_function_with_gc_and_c_functions():
    funcs = faults.functions(raw())
    assert [f["function"] for f in funcs[:2]] == ["handle", "collect"]
    handle, collect = funcs[0], funcs[1]
    assert handle["bytes"] == 400 * 4096 and handle["share"] == 0.8 and handle["gc_bytes"] == 0
    assert [c["name"] for c in handle["c_functions"]] == ["dictiter_iternextvalue", "_PyEval_EvalFrameDefault"]
    assert handle["workers"] == [101, 102]
    assert collect["gc_bytes"] == collect["bytes"] == 100 * 4096


def test_period_and_lost_records_scale_the_bytes():
    # Every 8th fault a sample; 600 read and 200 lost: each sample stands for 8 x 800/600 pages.
    s = faults.summary(raw(period=8, lost=200))
    assert s["copied_bytes"] == round(500 * 4096 * 8 * 800 / 600)
    assert s["functions"][0]["bytes"] == round(400 * 4096 * 8 * 800 / 600)
    assert s["per_worker_bytes"] == {"101": round(400 * 4096 * 8 * 800 / 600), "102": round(100 * 4096 * 8 * 800 / 600)}


def test_collapsed_stacks_are_outermost_first_with_gc_and_c_frames():
    lines = faults.collapsed(raw())
    assert "<module> (main.py:3);handle (app.py:12);dictiter_iternextvalue [C] 1200" in lines
    assert "<module> (main.py:3);collect (app.py:20);[garbage collection];gc_collect_main [C] 400" in lines
    # Zero-byte rows are left out; a ';' in a name would split a frame.
    assert not any(HOSTILE in line for line in lines)


def test_text_table():
    session = default_session()
    session.faults = raw()
    text = memory_text.render(session)
    assert "Who copied shared pages (sampled page faults, every 1; 2.0 MiB copied):" in text
    row = next(line for line in text.splitlines() if "handle (app.py)" in line)
    assert row.split()[:3] == ["1.6", "80.0%", "0%"] and row.endswith("<- dictiter_iternextvalue, _PyEval_EvalFrameDefault")
    assert "collect (app.py) <- gc_collect_main" in text and "100%" in text
    # Without --faults: no table.
    assert "Who copied" not in memory_text.render(default_session())


def test_html_page_is_the_shared_report_with_the_memory_part():
    session = default_session()
    r = raw()
    r["rows"][3]["samples"] = 5
    session.faults = r
    page = memory_html.render(session)
    # The shared page (its flame graph section, the memory part's script), titled as a memory report.
    assert 'id="flame-section"' in page and 'id="memory-section"' in page and "const MEM = DATA.memory;" in page
    assert "<title>gilty memory: pid 100</title>" in page
    # The hostile name is in the page's data only, escaped; the flame graph is drawn from the collapsed stacks.
    assert HOSTILE not in page and "<img" not in page
    data = embedded_data(page)
    part = data["memory"]
    assert data["processes"] == [] and part["report"]["kind"] == "memory"
    assert any(line.startswith(f"{HOSTILE} (x,y.py:1);[unknown] [C] ") for line in part["report"]["faults"]["collapsed"])
    # The figures are the JSON report's and the text report's, the samples cut to the last.
    whole = json.loads(memory_json.render(session))
    for shown, full in zip(part["report"]["processes"], whole["processes"]):
        assert shown["samples"] == full["samples"][-1:] and shown["samples_measured"] == len(full["samples"])
        assert shown["cow"] == full["cow"] and shown["since_fork"] == full["since_fork"]
    assert part["report"]["summary"] == whole["summary"] and part["text"] == memory_text.render(session)
    assert part["headline"] == memory_text.render(session).splitlines()[0]
    # Without --faults, no fault part; the memory script is on memory pages only.
    assert embedded_data(memory_html.render(default_session()))["memory"]["report"]["faults"] is None
    assert "const MEM = DATA.memory;" not in html_report.render(Recording(rate_hz=100.0))


def documented_keys() -> set:
    section = DOC.read_text(encoding="utf-8").split("## JSON report", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def key_paths(value, prefix="") -> set:
    paths = set()
    if isinstance(value, dict):
        for key, child in value.items():
            if prefix.endswith("per_worker_bytes"):
                continue  # keyed by pid
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            paths |= key_paths(child, path)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for item in value:
            paths |= key_paths(item, prefix + "[]")
    return paths


def test_json_keys_match_the_documentation():
    session = default_session()
    r = raw()
    r["errors"] = [(103, "perf events are not permitted")]
    session.faults = r
    report = json.loads(memory_json.render(session))
    present = {p for p in key_paths(report["faults"], "faults")}
    documented = documented_keys()
    assert documented, "no keys parsed from docs/memory-faults.md"
    assert documented - present == set(), "documented but missing from the report"
    assert present - documented == set(), "in the report but not documented"
    assert json.loads(memory_json.render(default_session()))["faults"] is None
