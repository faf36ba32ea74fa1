"""`gilty record -o FILE` in every format against a real target, and `gilty report` from its JSON.

spinners.py runs two threads in spin_forever(), taking the GIL from each other: every format
must name the function, the threads, and show both holding and waiting.
"""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import run_gilty, running_target
from formats_support import recording_interpreter, speedscope_schema

DURATION_S = 1.5
RATE_HZ = 200
OUTPUTS = ("x.speedscope.json", "x.collapsed", "x.svg", "x.trace.json", "x.html", "x.json")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """{file name: text} of one recording per format of one spinners.py process."""
    interp = recording_interpreter()
    out_dir = tmp_path_factory.mktemp("formats")
    texts = {}
    with running_target(interp, "spinners.py") as proc:
        for name in OUTPUTS:
            path = out_dir / name
            rc, _out, err = run_gilty("record", "--pid", proc.pid, "--duration", DURATION_S, "--rate", RATE_HZ, "-o", path)
            assert rc == 0, f"gilty record -o {name} exited {rc}: {err}"
            assert f"gilty: wrote {path}" in err
            texts[name] = path.read_text(encoding="utf-8")
        texts["_pid"] = proc.pid
    texts["_dir"] = out_dir
    return texts


def test_speedscope_names_threads_and_functions(outputs):
    doc = json.loads(outputs["x.speedscope.json"])
    pid = outputs["_pid"]
    names = [p["name"] for p in doc["profiles"]]
    assert any(n.startswith(f"pid {pid} · spinner-1 (tid ") for n in names), names
    assert any(n.startswith(f"pid {pid} · spinner-2 (tid ") for n in names), names
    frames = doc["shared"]["frames"]
    spin = [f for f in frames if f["name"] == "spin_forever"]
    assert spin and all(f["file"].endswith("spinners.py") for f in spin)
    spinner = next(p for p in doc["profiles"] if "spinner-1" in p["name"])
    roots = {frames[s[0]]["name"] for s in spinner["samples"]}
    assert {"holding_gil", "waiting_gil"} <= roots


def test_speedscope_is_valid_against_the_published_schema(outputs, pytestconfig):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed (requirements-dev.txt)")
    # pytest's cache keeps the unpacked schema between runs; without it (-p no:cacheprovider), a temp dir.
    cache = getattr(pytestconfig, "cache", None)
    folder = cache.mkdir("gilty-speedscope") if cache is not None else Path(tempfile.mkdtemp(prefix="gilty-speedscope-"))
    schema = speedscope_schema(folder)
    doc = json.loads(outputs["x.speedscope.json"])
    jsonschema.validate(doc, schema)
    # The schema does bite: a sampled profile without weights is refused.
    del doc["profiles"][0]["weights"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_collapsed_lines(outputs):
    pid = outputs["_pid"]
    lines = outputs["x.collapsed"].splitlines()
    assert lines
    for line in lines:
        stack, count = line.rsplit(" ", 1)
        assert count.isdigit() and stack.startswith(f"pid {pid} · ")
    spin = [line for line in lines if ";spin_forever (" in line and "spinners.py:" in line]
    assert any(";spinner-1 (tid " in line and ";holding_gil;" in line for line in spin)
    assert any(";spinner-2 (tid " in line and ";waiting_gil;" in line for line in spin)


def test_svg_is_xml_with_the_functions(outputs):
    root = ET.fromstring(outputs["x.svg"])
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = " ".join(root.itertext())
    assert "spin_forever (" in text and "spinner-1 (tid " in text and "holding_gil" in text
    assert f"pid {outputs['_pid']}" in text  # the title names the target


def test_trace_events(outputs):
    doc = json.loads(outputs["x.trace.json"])
    pid = outputs["_pid"]
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] == "ms"
    for e in events:
        assert {"ph", "name", "pid", "tid"} <= set(e), e
        assert e["ph"] in ("M", "X")
        if e["ph"] == "X":
            assert {"ts", "dur", "cat"} <= set(e) and e["dur"] >= 0
    meta = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    assert any(m.startswith(f"python {pid} ") for m in meta)
    assert "GIL owner" in meta and any(m.startswith("spinner-1 (tid ") for m in meta)
    slices = [e for e in events if e["ph"] == "X" and e["name"] in ("holding_gil", "waiting_gil")]
    assert slices
    # The stacks are on each thread's stack track, one nested slice per frame.
    stack_tracks = {
        e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"].endswith(" stack")
    }
    frames = [e for e in events if e["ph"] == "X" and e["tid"] in stack_tracks]
    assert any(e["name"].startswith("spin_forever (spinners.py:") for e in frames)
    owner = {e["name"] for e in events if e["ph"] == "X" and e["cat"] == "gil"}
    assert {"spinner-1", "spinner-2"} <= owner
    # All slices lie within the recording (µs).
    assert max(e["ts"] + e["dur"] for e in events if e["ph"] == "X") <= (DURATION_S + 0.5) * 1e6


def test_html_has_the_data(outputs):
    page = outputs["x.html"]
    assert page.startswith("<!doctype html>")
    assert "spin_forever" in page and "spinner-2" in page
    assert "https://" not in page and "http://" not in page


def test_report_rebuilds_each_format_from_the_json(outputs):
    out_dir = outputs["_dir"]
    for name in OUTPUTS[:-1]:
        rebuilt = out_dir / f"rebuilt-{name}"
        rc, _out, err = run_gilty("report", out_dir / "x.json", "-o", rebuilt)
        assert rc == 0, err
        text = rebuilt.read_text(encoding="utf-8")
        assert "spin_forever" in text and "spinner-1" in text, name
