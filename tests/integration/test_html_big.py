"""A large saved recording renders to HTML in memory comparable to its text report, and the page
loads in Chromium.

The recording is real (tests/targets/napping_threads.py: 60 threads changing state every few
milliseconds, recorded at 1000 Hz), then laid end to end with itself in time until its JSON is
about 10 MB: the runs of a long recording, made in seconds. Memory is compared with the text
report of the same file in the same run, never with a fixed figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, gilty_env, run_gilty, running_target
from formats_support import recording_interpreter

pytestmark = pytest.mark.alone

ABSENT = 255  # run state of passes in which a thread was not seen (gilty.sampling.aggregate)
TARGET_MIB = 10
# The HTML report holds the text report's data plus the page: bounded by the same order of memory.
# Before the timeline streamed the run columns, the page cost ~2x the text report at this size.
MAX_RSS_RATIO = 1.4


def tiled(session: dict, copies: int) -> dict:
    """The saved session ``session`` recorded ``copies`` times in a row: passes, runs and counts repeated."""
    times, passes = session["times"], len(session["times"])
    span = session["duration_s"] or (times[-1] - times[0] + 1.0 / session["rate_hz"])
    out = dict(session)
    out["times"] = [t + j * span for j in range(copies) for t in times]
    out["pass_flags"] = session["pass_flags"] * copies
    runs = {}
    for tid, cols in session["runs"].items():
        start, end = cols["start"], cols["start"] + sum(cols["passes"])
        new = {name: [] for name in ("passes", "state", "stack", "syscall")}
        for j in range(copies):
            gap = passes - end + start  # from this copy's last run to the next copy's first
            for name in new:
                new[name] += cols[name]
            if j + 1 < copies and gap:
                for name, value in (("passes", gap), ("state", ABSENT), ("stack", -1), ("syscall", -1)):
                    new[name].append(value)
        runs[tid] = {"start": start, **new}
    out["runs"] = runs
    out["counts"] = [[*key, n * copies] for *key, n in session["counts"]]
    out["blame"] = [[*key, n * copies] for *key, n in session["blame"]]
    out["held_cpu_wait"] = [[tid, n * copies] for tid, n in session.get("held_cpu_wait", [])]
    out["duration_s"] = span * copies
    out["exact"] = None
    out.pop("timeline", None)  # its pass counts and folds are counted again from the tiled runs on loading
    return out


@pytest.fixture(scope="module")
def big_recording(tmp_path_factory) -> Path:
    interp = recording_interpreter()
    tmp = tmp_path_factory.mktemp("html-big")
    small = tmp / "small.json"
    with running_target(interp, "napping_threads.py", "60") as proc:
        rc, _out, err = run_gilty("record", "--pid", proc.pid, "--duration", 1.5, "--rate", 1000, "--format", "json", "-o", small)
    assert rc == 0, err
    rec = json.loads(small.read_text())["recording"]
    size = len(json.dumps(rec))
    copies = max(2, int(TARGET_MIB * 2**20 / max(size, 1)) + 1)
    rec["processes"] = [tiled(p, copies) for p in rec["processes"]]
    rec["duration_s"] = max(p["duration_s"] for p in rec["processes"])
    big = tmp / "big.json"
    big.write_text(json.dumps({"recording": rec}))
    return big


# Runs the CLI and then writes its own VmHWM to stderr: the high-water mark of this program's memory
# only (a child's rusage would count the forking test process's memory too).
PEAK = (
    "import sys; from gilty.cli import main; rc = main(sys.argv[1:]);"
    "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')];"
    "print('VmHWM', hwm[0], file=sys.stderr); sys.exit(rc)"
)


def peak_rss_kib(*args) -> int:
    """Peak RSS (KiB) of one `gilty` command, after checking that it succeeded."""
    python = REPO / ".venv" / "bin" / "python"
    cmd = [str(python) if python.exists() else sys.executable, "-c", PEAK] + [str(a) for a in args]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, env=gilty_env(), cwd=str(REPO), timeout=300)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, err
    return int(err.rsplit("VmHWM", 1)[1].split()[0])


def test_html_of_a_large_recording_needs_memory_like_its_text_report(big_recording, tmp_path):
    runs = sum(
        len(r["passes"]) for p in json.loads(big_recording.read_text())["recording"]["processes"] for r in p["runs"].values()
    )
    text_kib = peak_rss_kib("report", big_recording, "-o", tmp_path / "x.txt")
    html_kib = peak_rss_kib("report", big_recording, "-o", tmp_path / "x.html")
    size = big_recording.stat().st_size
    print(f"{size / 2**20:.1f} MiB recording, {runs} runs: peak RSS text {text_kib} KiB, html {html_kib} KiB")
    assert html_kib <= MAX_RSS_RATIO * text_kib, (html_kib, text_kib)
    # The page holds a bounded timeline, not the runs: far smaller than the recording.
    assert (tmp_path / "x.html").stat().st_size < size / 4


def test_chromium_draws_the_page_of_a_large_recording(big_recording, tmp_path):
    test_html_chromium = pytest.importorskip("test_html_chromium")
    if test_html_chromium.CHROMIUM is None:
        pytest.skip("chromium not installed (make system-deps installs it)")
    page = tmp_path / "big.html"
    rc, _out, err = run_gilty("report", big_recording, "-o", page)
    assert rc == 0, err
    data = json.loads(big_recording.read_text())["recording"]
    threads = sum(len(p["runs"]) for p in data["processes"])
    browser = test_html_chromium.Browser(tmp_path / "profile")
    try:
        browser.open(page)
        assert browser.js("document.body.dataset.ready") == "1", "the report's script did not finish"
        assert browser.errors() == []
        assert browser.js("document.querySelectorAll('#timeline .tl-row').length") >= threads
        bands = browser.js("document.querySelectorAll('#timeline .tl-band').length")
        from gilty.report.recording.html import PAGE_BANDS, band_limit

        assert threads <= bands <= max(PAGE_BANDS, threads * band_limit(threads))
    finally:
        browser.close()
