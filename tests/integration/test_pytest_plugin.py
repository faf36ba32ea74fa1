"""The pytest plugin, run as a user would: pytest in a subprocess on a sample test file.
Two spinning threads wait for the GIL about half of the test, so a 20 % wait budget fails and a
90 % one passes; a sleeping test passes; without --gilty nothing is judged."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO, TARGETS


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "--rootdir", str(TARGETS),
         str(TARGETS / "gil_budget_tests.py"), *args],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )


def test_budget_fails_only_the_contended_test():
    done = _pytest("--gilty")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
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
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode != 0
    assert "gil_budget takes only max_wait, max_hold, max_gc" in done.stdout + done.stderr
