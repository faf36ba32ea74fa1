"""Format names, file extensions, and what happens with an extension gilty does not know."""

import importlib.util

import pytest
from gilty import report as reports
from gilty._errors import EXIT_USAGE, UsageError
from gilty.cli import main
from recordings import one_process


@pytest.mark.parametrize(
    "path, fmt",
    [
        ("out.speedscope.json", "speedscope"),
        ("OUT.SPEEDSCOPE.JSON", "speedscope"),
        ("a/b.trace.json", "chrome"),
        ("x.collapsed", "collapsed"),
        ("x.folded", "collapsed"),
        ("x.svg", "svg"),
        ("x.html", "html"),
        ("x.htm", "html"),
        ("report.json", "json"),
        ("report.txt", "text"),
    ],
)
def test_extension_picks_the_format(path, fmt):
    assert reports.output_format(None, path) == fmt


def test_explicit_format_wins_over_the_extension():
    assert reports.output_format("collapsed", "x.json") == "collapsed"
    assert reports.output_format("html", "no-extension") == "html"


def test_stdout_defaults_to_text():
    assert reports.output_format(None, None) == "text"


@pytest.mark.parametrize("path", ["x.pdf", "x", "x.json.bak", "x.speedscope"])
def test_unknown_extension_is_a_usage_error(path):
    with pytest.raises(UsageError) as e:
        reports.output_format(None, path)
    assert path in str(e.value) and "--format" in str(e.value)


BINARY_FORMATS = ("pprof",)


def test_every_format_has_a_renderer_that_returns_text_or_bytes():
    rec = one_process()
    native = importlib.util.find_spec("gilty._native") is not None
    for fmt in reports.FORMAT_NAMES:
        if fmt == "svg" and not native:
            continue  # drawn by the native extension; test_renderers_stacks skips it with the reason
        out = reports.render(rec, fmt)
        assert isinstance(out, bytes if fmt in BINARY_FORMATS else str) and out, fmt


def test_report_with_unknown_extension_writes_nothing(tmp_path, capsys):
    saved = tmp_path / "rec.json"
    saved.write_text(reports.render(one_process(), "json"))
    out = tmp_path / "out.pdf"
    assert main(["report", str(saved), "-o", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "out.pdf" in err
    assert not out.exists()


def test_record_with_unknown_extension_fails_before_recording(tmp_path, capsys):
    # pid 1 is never attached to: the extension is checked first.
    out = tmp_path / "out.xyz"
    assert main(["record", "--pid", "1", "--duration", "1", "-o", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("gilty: error: cannot tell the format") and len(err.splitlines()) == 1
    assert not out.exists()


# -- the one output registry: (result, format) -> renderer, for every command ----------------------

# Each command's --format choices and the kinds of result it writes with them (load writes a Locust
# run with the same choices; specialization on 3.10 an opcache reading with text and json only).
COMMAND_RESULTS = {
    "record": ("recording",),
    "report": ("recording",),
    "memory": ("memory",),
    "specialization": ("specialization",),
    "load": ("load", "locust"),
    "compare": ("compare",),
    "dump": ("dump",),
}


def offered_formats(capsys) -> dict:
    """Each command's --format choices as its --help shows them (the CLI run whole)."""
    import re

    offered = {}
    for name in COMMAND_RESULTS:
        assert main([name, "--help"]) == 0
        offered[name] = re.search(r"--format \{([a-z,]+)\}", capsys.readouterr().out).group(1).split(",")
    return offered


def test_every_format_a_command_offers_has_a_renderer(capsys):
    offered = offered_formats(capsys)
    for command, kinds in COMMAND_RESULTS.items():
        for kind in kinds:
            for fmt in offered[command]:
                assert callable(reports.renderer(kind, fmt)), (command, kind, fmt)
    for fmt in ("text", "json"):
        assert callable(reports.renderer("opcache", fmt))


def test_every_result_class_is_registered_under_its_name():
    for name, kind in reports.RESULTS.items():
        module, cls = name.rsplit(".", 1)
        assert getattr(importlib.import_module(module), cls), name
        assert reports.formats(kind), kind


def test_a_format_a_result_is_not_written_as_is_one_usage_line():
    with pytest.raises(UsageError) as e:
        reports.check("opcache", "html")
    assert str(e.value) == "the Python 3.10 opcache report is text or json"
    with pytest.raises(UsageError) as e:
        reports.renderer("memory", "svg")
    assert str(e.value) == "the memory report is text, json or html" and e.value.exit_code == EXIT_USAGE


def test_a_result_of_no_registered_class_is_refused():
    with pytest.raises(TypeError):
        reports.kind_of({"steps": []})
