"""A 4,100-character name (function, file, task, thread) is cut with an ellipsis in every text output,
as the recording's text outputs cut it (issue 30: `dump --tasks` and `specialization` printed it
whole). JSON keeps what was read."""

from __future__ import annotations

import pytest
from conftest import AVAILABLE, parse_json, run_gilty, running_target

LONG = "long_" + "n" * 4_100
WIDEST_LINE = 1_000  # a cut name is 200 characters; a line holds a few of them


@pytest.fixture(scope="module")
def target():
    interp = next((i for i in AVAILABLE if i.minor_str == "3.12" and not i.id.startswith("debian")), None)
    if interp is None:
        pytest.skip("pyenv Python 3.12 not installed")
    with running_target(interp, "long_names.py") as proc:
        yield proc


def _assert_cut(text: str, what: str) -> None:
    assert "long_nnnn" in text and "…" in text, f"{what}: the long name is not shown, cut:\n{text[:3000]}"
    widest = max(text.splitlines(), key=len)
    assert len(widest) <= WIDEST_LINE, f"{what}: a line of {len(widest)} characters: {widest[:300]}…"


def test_dump_tasks_text_cuts_long_names(target):
    rc, out, err = run_gilty("dump", "--pid", target.pid, "--tasks")
    assert rc == 0, err
    assert "Event loop" in out, out[:3000]
    _assert_cut(out, "dump --tasks")


def test_dump_tasks_json_keeps_long_names(target):
    rc, out, err = run_gilty("dump", "--pid", target.pid, "--tasks", "--format", "json")
    assert rc == 0, err
    names = [t["name"] for t in parse_json(out)["asyncio"]["tasks"] if t["name"].startswith("long_")]
    # As long as the reader takes a task name (it bounds what it reads), never the text outputs' cut.
    assert names and len(names[0]) > 1_000 and "…" not in names[0] and LONG.startswith(names[0]), names


def test_specialization_text_cuts_long_names(target):
    rc, out, err = run_gilty("specialization", "--pid", target.pid, "--duration", "1")
    assert rc == 0, err
    _assert_cut(out, "specialization")
