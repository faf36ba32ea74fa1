"""`gilty report` renders every kind of saved JSON again (issue 16): a `gilty load` report (it
answered "holds no gilty recording" before), a `gilty specialization` report and a `gilty compare`
report, each from a real run, as text, JSON and, where the command has one, HTML."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import TARGETS, free_port, run_gilty, running_target
from formats_support import recording_interpreter


def _report(src, out):
    rc, stdout, err = run_gilty("report", src, *(["-o", out] if out else []))
    assert rc == 0, err
    return stdout if out is None else out.read_text()


def test_a_saved_load_report_is_rendered_again(tmp_path):
    port = free_port()
    saved = tmp_path / "load.json"
    rc, _out, err = run_gilty(
        "load",
        f"http://127.0.0.1:{port}/",
        "--rate",
        20,
        "--duration",
        2,
        "-o",
        saved,
        "--",
        sys.executable,
        TARGETS / "http_delay_server.py",
        port,
        0.01,
        "threads",
        timeout=120,
    )
    assert rc == 0, err
    text = _report(saved, None)
    assert text.startswith(f"gilty load: http://127.0.0.1:{port}/") and "RATE" in text, text
    step = next(line for line in text.splitlines() if line.split()[:1] == ["20"])
    assert float(step.split()[1]) > 10, step  # the achieved rate, as the run measured it
    assert json.loads(_report(saved, tmp_path / "again.json")) == json.loads(saved.read_text())
    page = _report(saved, tmp_path / "load.html")
    assert page.startswith("<!doctype html>") and '"kind":"load"' in page
    # A flame graph cannot be drawn from a load report: one line, exit 2.
    rc, _out, err = run_gilty("report", saved, "-o", tmp_path / "load.svg")
    assert rc == 2 and "a load report is written as text, json, html" in err, err


def test_a_saved_specialization_report_is_rendered_again(tmp_path):
    interp = recording_interpreter()
    with running_target(interp, "specialization_sites.py", "run", str(tmp_path / "truth.json")) as proc:
        rc, out, err = run_gilty("specialization", "--pid", proc.pid, "--duration", 1, "--format", "json", timeout=60)
    assert rc == 0, err
    saved = tmp_path / "spec.json"
    saved.write_text(out)
    text = _report(saved, None)
    assert "Verdict:" in text and "Per family:" in text, text
    page = _report(saved, tmp_path / "spec.html")
    assert page.startswith("<!doctype html>") and '"kind":"specialization"' in page


def test_a_saved_compare_report_is_rendered_again(tmp_path):
    interp = recording_interpreter()
    recs = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.json"
        rc, _out, err = run_gilty("record", "--duration", 1, "-o", path, "--", interp.path, TARGETS / "duty_cycle.py", 0.3)
        assert rc == 0, err
        recs.append(path)
    saved = tmp_path / "cmp.json"
    rc, out, err = run_gilty("compare", *recs, "--format", "json")
    assert rc == 0, err
    saved.write_text(out)
    rc, direct, err = run_gilty("compare", *recs)
    assert rc == 0, err
    assert _report(saved, None) == direct


def test_a_saved_python_310_opcache_report_is_rendered_again(tmp_path):
    from conftest import AVAILABLE

    interp = next((i for i in AVAILABLE if i.minor_str == "3.10" and i.path and not i.id.startswith("debian")), None)
    if interp is None:
        pytest.skip("pyenv Python 3.10 not installed (the opcache report is for 3.10 only)")
    with running_target(interp, "specialization_sites.py", "run", str(tmp_path / "truth.json")) as proc:
        rc, out, err = run_gilty("specialization", "--pid", proc.pid, "--duration", 1, "--format", "json", timeout=60)
    assert rc == 0, err
    saved = tmp_path / "opcache.json"
    saved.write_text(out)
    text = _report(saved, None)
    assert text.startswith(f"gilty specialization: pid {proc.pid}, Python 3.10") and "(opcache)" in text, text
    rc, _out, err = run_gilty("report", saved, "-o", tmp_path / "opcache.html")
    assert rc == 2 and "text or json" in err, err
