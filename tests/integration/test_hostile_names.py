"""A target that names everything with hostile text, recorded and drawn in every format.

tests/targets/hostile_names.py names its functions, qualified names, files and threads with HTML,
script, ANSI escapes, BEL, newlines, C1 controls, right-to-left overrides, lone surrogates and a
10 kB name, and its command line carries ESC, BEL and U+202E. Every format must reach the operator
with none of those bytes acting: the terminal formats are read byte by byte, the SVG and HTML in
headless Chromium.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from conftest import TARGETS, free_port, gilty_command, gilty_env, run_gilty, running_target
from formats_support import recording_interpreter
from gilty import report
from gilty.cli import main as gilty_main

ARGV_HOSTILE = "arg\x1b[31m\x07\u202e"
# Bytes a terminal acts on: C0 controls but newline and tab, and DEL.
TERMINAL_CONTROL = set(range(0x20)) - {0x0A, 0x09} | {0x7F}
# Code points that act instead of showing once decoded: C1 controls, direction overrides and isolates;
# and those shown as nothing (issue 30): zero-width space and joiners, word joiner, byte-order mark,
# a variation selector, tag characters.
HIDDEN_CODEPOINTS = (
    set(range(0x80, 0xA0))
    | {0x061C, 0x200E, 0x200F, 0x2028, 0x2029}
    | set(range(0x202A, 0x202F))
    | set(range(0x2066, 0x206A))
    | {0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0xFE0F}
    | set(range(0xE0000, 0xE0080))
)
# How the text formats show the zero-width and tag names of the target.
INVISIBLE_SHOWN = ("zero\\u200bwidth\\u200d\\u2060join\\ufeff", "tag\\U000e0041\\U000e007fend\\ufe0f")


def hostile_names() -> list:
    """The target's own list, read from its source (the test and the target cannot drift apart)."""
    scope: dict = {}
    source = (TARGETS / "hostile_names.py").read_text(encoding="utf-8")
    exec(compile(source.split("\n\ndef spin", 1)[0], "hostile_names", "exec"), scope)  # only the constants
    return scope["HOSTILE"]


def assert_inert(data: bytes, what: str) -> str:
    """No byte or code point of ``data`` acts on a terminal; returns it decoded."""
    bad = sorted({b for b in data if b in TERMINAL_CONTROL})
    assert not bad, f"{what}: raw control bytes {[hex(b) for b in bad]}"
    text = data.decode("utf-8")  # strict: a lone surrogate cannot be encoded, so none got through
    hidden = sorted({hex(ord(c)) for c in text if ord(c) in HIDDEN_CODEPOINTS})
    assert not hidden, f"{what}: raw {hidden}"
    return text


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(recording path, dump output, top output) of one run of the hostile target."""
    interp = recording_interpreter()
    out = tmp_path_factory.mktemp("hostile")
    rec = out / "hostile.json"
    with running_target(interp, "hostile_names.py", ARGV_HOSTILE) as proc:
        rc, _out, err = run_gilty("record", "--pid", proc.pid, "--duration", 1.5, "--rate", 200, "-o", rec)
        assert rc == 0, err
        dump = subprocess.run(
            gilty_command() + ["dump", "--pid", str(proc.pid)], capture_output=True, timeout=60, env=gilty_env()
        )
        top = subprocess.run(
            gilty_command() + ["top", "--pid", str(proc.pid), "--duration", "1"],
            capture_output=True,
            timeout=60,
            env=gilty_env(),
        )
    assert dump.returncode == 0, dump.stderr
    assert top.returncode == 0, top.stderr
    return rec, dump.stdout, top.stdout


def rendered(rec: Path, fmt: str, tmp_path: Path) -> bytes:
    """``gilty report REC --format FMT -o FILE``, run in this process; the file's bytes."""
    path = tmp_path / f"out.{fmt}"
    assert gilty_main(["report", str(rec), "--format", fmt, "-o", str(path)]) == 0
    return path.read_bytes()


def test_the_recording_has_the_hostile_names(hostile):
    data = json.loads(hostile[0].read_text(encoding="utf-8"))
    names = set(data["recording"]["processes"][0]["thread_names"].values())
    functions = {f[0] for f in data["recording"]["processes"][0]["frames"].values()}
    # The JSON keeps the target's names whole (lone surrogates arrive as U+FFFD from the reader).
    for name in hostile_names():
        shown = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in name)
        # (the reader may cut a 10 kB name; its start is enough to know it arrived)
        assert any(n.startswith(shown[:100]) for n in names), (name[:40], sorted(n[:40] for n in names))
        assert any(shown[:100] in f for f in functions), name[:40]


# pprof is gzipped protobuf, never shown on a terminal (emit refuses to): its names are checked decoded.
TEXT_FORMATS = [f for f in report.FORMAT_NAMES if f != "pprof"]


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_every_format_writes_no_acting_byte(hostile, fmt, tmp_path):
    text = assert_inert(rendered(hostile[0], fmt, tmp_path), fmt)
    if fmt in ("json", "speedscope", "chrome", "gecko"):
        assert text.isascii(), f"{fmt}: JSON data must be ASCII-only"
    else:
        # The escapes are shown, not dropped: a reader can see the name held ESC, BEL and a newline
        # (in the HTML page's JSON data, the backslash of each is itself escaped).
        for shown in ("\\x1b[2J", "\\x07", "new\\nline\\r\\nrow", "rtl\\u202eevil.py", *INVISIBLE_SHOWN):
            shown = json.dumps(shown)[1:-1] if fmt == "html" else shown
            assert shown in text, f"{fmt} does not show {shown!r}"
    if fmt in ("text", "collapsed", "svg"):
        assert "x" * 1000 not in text, f"{fmt}: the 10 kB name is not cut"


def test_text_rows_are_not_split_by_a_newline_in_a_thread_name(hostile, tmp_path):
    text = rendered(hostile[0], "text", tmp_path).decode("utf-8")
    assert not any(line.startswith(("line", "row")) for line in text.splitlines())
    rows = [line for line in text.splitlines() if line.startswith("new\\nline")]
    assert rows and all(len(line.split()) > 3 for line in rows), rows


def test_collapsed_has_one_line_per_stack(hostile, tmp_path):
    for line in rendered(hostile[0], "collapsed", tmp_path).decode("utf-8").splitlines():
        assert line.startswith("pid "), line[:80]
        assert line.rsplit(" ", 1)[1].isdigit(), line[-80:]


def test_svg_is_well_formed_xml(hostile, tmp_path):
    root = ET.fromstring(rendered(hostile[0], "svg", tmp_path))
    assert root.tag.endswith("svg")


def test_dump_and_top_write_no_acting_byte(hostile):
    _rec, dump, top = hostile
    for what, data in (("dump", dump), ("top", top)):
        text = assert_inert(data, what)
        assert "\\x1b[2J" in text and "new\\nline" in text, what
        assert "zero\\u200bwidth" in text and "tag\\U000e0041" in text, what  # (top cuts its columns)


def test_compare_writes_no_acting_byte(hostile, tmp_path):
    rec = str(hostile[0])
    out = io.StringIO()
    with redirect_stdout(out):
        assert gilty_main(["compare", rec, rec]) == 0
    text = assert_inert(out.getvalue().encode("utf-8"), "compare")
    assert "new\\nline" in text


# -- gilty's own lines on stderr, and /metrics (issue 30) --------------------------------------------

# A directory name a target's owner may choose for its executable: gilty's errors quote the path.
HOSTILE_DIR = "bin\x1b[2J\x1b]0;owned\x07\r\n\x9b31m\u202e\u200b\U000e0041"


@pytest.fixture(scope="module")
def hostile_exe(tmp_path_factory):
    """(parent pid, child pid): a Python parent of a copy of sleep(1) in a directory named HOSTILE_DIR."""
    folder = tmp_path_factory.mktemp("exe") / HOSTILE_DIR
    folder.mkdir()
    exe = folder / "sleep"
    shutil.copy("/bin/sleep", exe)
    with running_target(recording_interpreter(), "hostile_exe.py", str(exe)) as proc:
        child = int(proc.read_line(10))
        try:
            yield proc.pid, child
        finally:
            # the parent's end leaves its sleep(1) orphaned for an hour: it goes with the fixture
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize(
    "command",
    [
        ("dump", "--pid", "CHILD"),
        ("dump", "--pid", "PARENT", "-s"),
        ("record", "--pid", "CHILD", "--duration", "1"),
        ("record", "--pid", "CHILD", "-s", "--duration", "1"),
        ("top", "--pid", "CHILD", "--duration", "1"),
        ("top", "--pid", "CHILD", "-s", "--duration", "1"),
        ("specialization", "--pid", "CHILD", "--duration", "1"),
    ],
    ids=" ".join,
)
def test_errors_naming_a_hostile_executable_write_no_acting_byte(hostile_exe, command, tmp_path):
    # Issue 30: "pid N (/path...) is not a Python process" and "skipping pid ..." printed the path
    # raw, so with -s any unprivileged descendant could write into root's terminal.
    parent, child = hostile_exe
    args = [{"CHILD": str(child), "PARENT": str(parent)}.get(a, a) for a in command]
    if command[0] == "record":
        args += ["-o", str(tmp_path / "r.json")]
    done = subprocess.run(gilty_command() + args, capture_output=True, timeout=60, env=gilty_env(), stdin=subprocess.DEVNULL)
    text = assert_inert(done.stderr, " ".join(command))
    assert "not a Python process" in text and "\\x1b[2J\\x1b]0;owned\\x07" in text, text
    assert "Traceback" not in text


def test_metrics_of_hostile_names_act_on_nothing_and_parse(tmp_path, targets):
    # Issue 30: `curl .../metrics` in a terminal set its title and cleared it, and the Prometheus
    # parser refused the page for a raw CR in a thread name. The process label comes from the
    # script's name, so that is hostile too.
    from prometheus_client.parser import text_string_to_metric_families

    script = tmp_path / "evil\x1b]0;owned\x07\u202e\u200b.py"
    shutil.copy(TARGETS / "hostile_names.py", script)
    proc = targets(recording_interpreter(), str(script), ARGV_HOSTILE)
    port = free_port()
    serve = subprocess.Popen(
        gilty_command() + ["serve", "--pid", str(proc.pid), "--port", str(port), "--rate", "50"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=gilty_env(),
    )
    try:
        deadline, body = time.monotonic() + 30, b""
        while time.monotonic() < deadline and b"rtl" not in body:
            time.sleep(0.3)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    body = r.read()
            except OSError:
                pass
    finally:
        serve.terminate()
        serve.wait(10)
    text = assert_inert(body, "/metrics")
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    threads = {s.labels["thread"] for s in samples if "thread" in s.labels}
    for shown in ("\\x1b[2J\\x1b[31mred\\x1b]0;owned\\x07", "new\\nline\\r\\nrow", "rtl\\u202eevil.py\\u202c", *INVISIBLE_SHOWN):
        assert shown in threads, (shown, sorted(t[:40] for t in threads))
    assert {s.labels["process"] for s in samples if "process" in s.labels} == {"evil\\x1b]0;owned\\x07\\u202e\\u200b"}


# -- in a browser -------------------------------------------------------------------------------


def test_svg_draws_in_chromium_with_names_as_text(hostile, browser, tmp_path):
    path = tmp_path / "hostile.svg"
    path.write_bytes(rendered(hostile[0], "svg", tmp_path))
    browser.open(path)
    assert browser.errors() == []
    # An SVG that is not well-formed XML is shown as a <parsererror> page, not drawn.
    assert browser.js("document.getElementsByTagName('parsererror').length") == 0
    assert browser.js("document.documentElement.localName") == "svg"
    texts = browser.js("Array.from(document.querySelectorAll('text, title')).map(e => e.textContent).join('\\n')")
    assert "<img src=x onerror=alert(1)>" in texts and "\\x1b[2J" in texts
    assert browser.js("document.querySelectorAll('img, script[src], foreignObject').length") == 0
    assert not any(ord(c) in HIDDEN_CODEPOINTS or ord(c) < 0x09 for c in texts)


def test_html_draws_in_chromium_with_names_as_text(hostile, browser, tmp_path):
    path = tmp_path / "hostile.html"
    path.write_bytes(rendered(hostile[0], "html", tmp_path))
    browser.open(path)
    assert browser.errors() == []
    assert browser.js("document.body.dataset.ready") == "1"
    assert browser.js("document.querySelectorAll('img').length") == 0
    body = browser.js("document.body.textContent")
    frames = browser.js("Array.from(document.querySelectorAll('#flamegraph .frame')).map(e => e.textContent)")
    assert any(f.startswith("</script><img src=x onerror=alert(1)>") for f in frames), frames[:20]
    # The source view names the hot functions as text too (their files, named after them, do not exist).
    blocks = browser.js("Array.from(document.querySelectorAll('#source-view .src-name')).map(e => e.textContent)")
    assert any(b.startswith("</script><img src=x onerror=alert(1)>") for b in blocks), blocks[:20]
    # A direction override would turn the verdict paragraph around; it is shown as \u202e instead.
    assert "\u202e" not in body and "\\u202e" in body
    assert not any(ord(c) in HIDDEN_CODEPOINTS or ord(c) < 0x09 or 0x0A < ord(c) < 0x20 for c in body)


def test_pprof_names_are_visible(hostile, tmp_path):
    if "pprof" not in report.FORMAT_NAMES:
        pytest.skip("no pprof format in this build")
    import gzip

    data = gzip.decompress(rendered(hostile[0], "pprof", tmp_path))
    # The string table holds every name: none may carry a raw control or direction character.
    # (the protobuf's own varints are any byte: the raw names' byte sequences are what must be absent)
    assert b"\x1b[2J" not in data and "rtl\u202e".encode() not in data and b"bell\x07" not in data and b"new\nline" not in data
    assert b"\\x1b[2J" in data and b"new\\nline" in data
