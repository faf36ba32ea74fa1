"""tools/asyncio_layouts.py checks the `_asyncio` struct offsets it compiled against a live object of
each interpreter: the committed values pass, and a table with one wrong field is refused."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import asyncio_layouts  # noqa: E402
from conftest import INTERPRETERS  # noqa: E402


def committed_values(minor: int) -> dict:
    text = (REPO / f"crates/gilty-layouts/src/generated_asyncio/v3_{minor}.rs").read_text()
    out = {}
    for name, value in re.findall(r"^\s+(\w+): (?:Some\()?(-?\d+)\)?,$", text, re.M):
        out[f"async.{name}"] = value
    return out


def pyenv_interp(minor: int):
    for i in INTERPRETERS:
        if i.path and i.version and i.version[:2] == (3, minor):
            return i
    pytest.skip(f"no 3.{minor} interpreter installed")


@pytest.mark.parametrize("minor", [10, 11, 12, 13])
def test_committed_tables_pass_and_a_wrong_field_is_refused(minor):
    interp = pyenv_interp(minor)
    prefix = Path(interp.path).parent.parent
    values = committed_values(minor)
    assert asyncio_layouts.verify(prefix, (3, minor), values) == []
    wrong = dict(values, **{"async.task_coro": str(int(values["async.task_coro"]) + 8)})
    failed = asyncio_layouts.verify(prefix, (3, minor), wrong)
    assert any(f.startswith("task_coro") for f in failed), failed
