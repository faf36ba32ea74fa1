"""The pytest plugin, run as a user would: pytest in a subprocess on a sample test file.
Two spinning threads wait for the GIL about half of the test, so a 20 % wait budget fails and a
90 % one passes; a sleeping test passes; without --gilty nothing is judged."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from conftest import REPO, TARGETS
from timing_reference import Pressure, assert_unless_busy


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "--rootdir",
            str(TARGETS),
            str(TARGETS / "gil_budget_tests.py"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def _wait_shares(junit) -> dict:
    """{test name: worst thread's GIL-wait share}, as the plugin noted it in the junit report."""
    shares = {}
    for case in ET.parse(junit).iter("testcase"):
        for prop in case.iter("property"):
            if prop.get("name") == "gilty_max_wait_share":
                shares[case.get("name")] = float(prop.get("value"))
    return shares


@pytest.mark.alone  # the spinners' wait share is what the machine lets them wait: beside other jobs they wait for a CPU instead
def test_budget_fails_only_the_contended_test(tmp_path):
    pressure = Pressure()
    done = _pytest("--gilty", f"--junitxml={tmp_path / 'junit.xml'}")
    out = done.stdout
    shares = _wait_shares(tmp_path / "junit.xml") if (tmp_path / "junit.xml").exists() else {}
    assert_unless_busy(done.returncode == 1, pressure, f"worst GIL-wait share per test: {shares}\n{out}{done.stderr}")
    assert "1 failed, 3 passed" in out, out
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and "test_contended_over_budget" in failed[0], out
    # one line saying which thread and by how much
    reasons = [line for line in out.splitlines() if "GIL budget exceeded" in line]
    assert reasons, out
    assert "thread 'spinner-" in reasons[0] and "waited for the GIL" in reasons[0] and "(max_wait=20%)" in reasons[0]


def test_without_the_option_nothing_is_judged():
    done = _pytest()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


def test_a_bad_budget_is_one_clear_error(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("import pytest\n@pytest.mark.gil_budget(max_waiting=0.2)\ndef test_x():\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path), str(bad), "--gilty"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "gil_budget takes only max_wait, max_hold, max_gc" in done.stdout + done.stderr
