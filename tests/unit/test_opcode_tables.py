"""The generated opcode tables walk each interpreter's own adaptive bytecode.

A warmed function's `_co_code_adaptive` (specialized forms, inline caches) is walked with the committed
table's names and cache sizes alone; every step must land on an instruction `dis` reports, under the
name `dis` gives it. A wrong cache count or a renumbered opcode (3.14 and 3.15 renumbered most of them)
derails the walk. Runs on every interpreter found: it checks the table against the interpreter, not
gilty's reading of a target.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from conftest import INTERPRETERS, REPO

TABLES = REPO / "crates" / "gilty-layouts" / "src" / "generated_opcodes"

WARM = r"""
import dis, json
class A:
    def __init__(self): self.x = 1
def f(n, a):
    t = 0
    for i in range(n):
        t += a.x + len([i]) * 2.0
        if i in {1, 2}: t -= 1
        s = "a" + str(i)
    return t
for _ in range(50): f(30, A())
print(json.dumps({"raw": f.__code__._co_code_adaptive.hex(),
                  "ins": [(i.offset, i.opname) for i in dis.get_instructions(f, adaptive=True)]}))
"""


def table(minor: int) -> tuple[list[str], list[int]]:
    text = (TABLES / f"v3_{minor}.rs").read_text()
    names = re.findall(r'"([A-Z_0-9]*)"', re.search(r"names: \[(.*?)\]", text, re.S).group(1))
    caches = [int(x) for x in re.findall(r"\d+", re.search(r"caches: \[(.*?)\]", text, re.S).group(1))]
    assert len(names) == len(caches) == 256
    return names, caches


def _params():
    out = []
    for i in INTERPRETERS:
        if i.path and i.version and i.version[:2] >= (3, 11):
            out.append(pytest.param(i, id=i.id))
    return out or [pytest.param(None, marks=pytest.mark.skip(reason="no CPython 3.11+ found"))]


@pytest.mark.parametrize("python", _params())
def test_table_walks_warmed_adaptive_code(python):
    names, caches = table(python.version[1])
    r = subprocess.run([python.path, "-I", "-c", WARM], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    raw, want = bytes.fromhex(out["raw"]), dict(out["ins"])
    pos, seen, specialized = 0, 0, 0
    while pos < len(raw):
        name = names[raw[pos]]
        assert want.get(pos) == name, f"at {pos}: table says {name!r}, dis says {want.get(pos)!r}"
        seen += 1
        specialized += name not in ("LOAD_ATTR", "BINARY_OP", "CALL") and name.startswith(("LOAD_ATTR_", "CALL_"))
        pos += 2 + 2 * caches[raw[pos]]
    assert seen == len(want)
    assert specialized, "the warm-up specialized nothing: the walk proved less than it should"
