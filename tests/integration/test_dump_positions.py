"""Column ranges in `gilty dump --format json`: the position of the instruction each frame stands on,
against what `dis` gives in the same interpreter (3.11+; 3.10's line table has lines only)."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import TARGETS, line_of, parse_json, run_gilty, running_target, thread_named

pytestmark = pytest.mark.interpreter

SCRIPT = "positions.py"

# Positions of the CALL instructions that start on `line`, in every code object of the script, as
# the interpreter's own `dis` gives them.
DIS_CALLS = r"""
import dis, json, sys, types
path, line = sys.argv[1], int(sys.argv[2])
found = []
def walk(code):
    for ins in dis.get_instructions(code):
        if ins.opname == "CALL" and ins.positions.lineno == line:
            p = ins.positions
            found.append([p.lineno, p.end_lineno, p.col_offset, p.end_col_offset])
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            walk(c)
walk(compile(open(path, encoding="utf-8").read(), path, "exec"))
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def positions_target(interp):
    with running_target(interp, SCRIPT) as proc:
        yield proc


def dump_json(pid: int) -> dict:
    rc, out, err = run_gilty("dump", "--pid", pid, "--format", "json", timeout=30)
    assert rc == 0, f"gilty dump exited {rc}; stderr:\n{err}"
    return parse_json(out, "gilty dump --format json")


# Guards: columns decoded wrongly from the location table (short, one-line, long forms), the end
# line of a call split over lines lost, or a position from another instruction than the frame's.
def test_multiline_comprehension_call_position_matches_dis(interp, positions_target):
    dump = dump_json(positions_target.pid)
    top = thread_named(dump, "comprehension")["stack"][0]
    call_line = line_of(SCRIPT, "call")
    if interp.version[:2] == (3, 10):
        assert "position" in top and top["position"] is None, top
        pytest.skip("3.10: its line table has lines only, so frames carry no column range (position is null)")
    expected = json.loads(
        subprocess.run(
            [interp.path, "-I", "-c", DIS_CALLS, str(TARGETS / SCRIPT), str(call_line)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert len(expected) == 1, expected
    line, end_line, column, end_column = expected[0]
    assert end_line > line, "the call is split over lines"
    assert top["line"] == call_line, top
    assert top["position"] == {"line": line, "end_line": end_line, "column": column, "end_column": end_column}, top


# Guards: a frame's position not agreeing with its own line (read from another moment or instruction).
def test_every_position_agrees_with_its_line(interp, positions_target):
    dump = dump_json(positions_target.pid)
    frames = [f for t in dump["threads"] for f in t["stack"]]
    assert frames and all("position" in f for f in frames), frames
    if interp.version[:2] == (3, 10):
        assert all(f["position"] is None for f in frames), frames
        pytest.skip("3.10: lines only, every position is null")
    located = [f for f in frames if f["position"] is not None]
    assert len(located) >= len(frames) - 1, frames
    for f in located:
        p = f["position"]
        assert p["line"] == f["line"] and p["end_line"] >= p["line"], f
