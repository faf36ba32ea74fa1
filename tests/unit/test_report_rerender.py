"""`gilty report`: every format rebuilt from a saved JSON report equals rendering directly."""

import importlib.util
import json

import pytest
from gilty import report as reports
from gilty._errors import EXIT_OK, EXIT_USAGE
from gilty.cli import main
from gilty.report.recording import json as json_report
from gilty.sampling.session import Recording
from recordings import one_process, two_processes
from test_json_report import exact_session

EXTENSIONS = {
    "html": "html",
    "svg": "svg",
    "speedscope": "speedscope.json",
    "chrome": "trace.json",
    "gecko": "gecko.json",
    "collapsed": "collapsed",
    "text": "txt",
    "json": "json",
    "pprof": "pb.gz",
}


def formats():
    native = importlib.util.find_spec("gilty._native") is not None
    return [f for f in reports.FORMAT_NAMES if f != "svg" or native]


@pytest.mark.parametrize("make", [one_process, two_processes, lambda: Recording.of(exact_session())])
def test_recording_key_round_trips(make):
    rec = make()
    saved = json.loads(reports.render(rec, "json"))
    back = Recording.from_dict(saved["recording"])
    assert back.pids == rec.pids
    for a, b in zip(rec.sessions, back.sessions):
        assert a.stack_counts() == b.stack_counts() and a.runs() == b.runs()
        # JSON object keys are strings: the exact summary's tids come back as "2" (summarise_exact reads both).
        assert json.loads(json.dumps(a.exact)) == b.exact


def test_json_report_recording_defaults_to_the_session_alone():
    session = one_process().sessions[0]
    assert json_report.report(session)["recording"]["processes"][0]["target"]["pid"] == 4242


def exact_recording():
    return Recording.of(exact_session())


@pytest.mark.parametrize("fmt", formats())
@pytest.mark.parametrize("make", [one_process, two_processes, exact_recording])
def test_report_writes_what_rendering_directly_writes(tmp_path, capsys, fmt, make):
    rec = make()
    saved = tmp_path / "rec.json"
    saved.write_text(reports.render(rec, "json"))
    out = tmp_path / f"out.{EXTENSIONS[fmt]}"
    assert main(["report", str(saved), "-o", str(out)]) == EXIT_OK
    assert capsys.readouterr().err == f"gilty: wrote {out}\n"
    # The loaded recording is rebuilt from JSON: render the same round trip directly.
    direct = reports.render(Recording.from_dict(json.loads(saved.read_text())["recording"]), fmt)
    written = out.read_bytes() if isinstance(direct, bytes) else out.read_text()
    assert written == direct
    if fmt not in ("json",):
        assert written == reports.render(rec, fmt)


def test_report_format_option_to_stdout(tmp_path, capsys):
    saved = tmp_path / "rec.json"
    saved.write_text(reports.render(one_process(), "json"))
    assert main(["report", str(saved), "--format", "collapsed"]) == EXIT_OK
    assert capsys.readouterr().out == reports.render(one_process(), "collapsed")


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json at all", "is not JSON"),
        ('{"format_version": 1, "threads": []}', 'no "recording" key'),
        ("[1, 2, 3]", "it is a JSON array, not an object"),
        # Issue 30: the key is there, what goes in it is not (was reported as no "recording" key).
        ('{"recording": {}}', 'its "recording" has no "recording_format_version"'),
        ('{"recording": [1]}', 'its "recording" is a JSON array, not an object'),
        ('{"recording": {"recording_format_version": 99}}', "unsupported recording format version 99"),
        ('{"recording": {"recording_format_version": 1, "processes": [{}]}}', "unsupported session format"),
        ('{"recording": {"recording_format_version": 1}}', "damaged: it has no 'processes' field"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    out = tmp_path / "out.html"
    assert main(["report", str(path), "-o", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("gilty: error:") and message in err, err
    assert not out.exists()


def test_missing_file_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.json")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("gilty: error: cannot read") and "No such file" in err
