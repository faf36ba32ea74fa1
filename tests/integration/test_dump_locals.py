"""`gilty dump --locals` against a target whose arguments and local variables are known exactly
(py-spy's locals test: names, order, argument flags, reprs of builtins, the empty string and a long
non-ASCII string; plus *args/**kwargs, keyword-only arguments, a cell, sets, bytes and cut values)."""

from __future__ import annotations

import pytest
from conftest import line_of, one_version, parse_json, run_gilty, running_target, settled_state, thread_named

pytestmark = pytest.mark.interpreter

SCRIPT = "local_vars.py"

# (name, is an argument, repr) of local_variable_lookup, in slot order. Values not known exactly
# (addresses, cut strings) are checked separately.
EXACT_LOOKUP = [
    ("arg1", True, '"foo"'),
    ("arg2", True, "None"),
    ("arg3", True, "True"),
    ("local1", False, "[-1234, 5678]"),
    ("local2", False, '("a", "b", "c")'),
    ("local3", False, "123456789123456789"),
    ("local4", False, "3.1415"),
    ("local5", False, '{"a": False, "b": (1, 2, 3)}'),
    ("local6", False, None),
    ("local7", False, None),
    ("local8", False, '""'),
    ("local9", False, 'b"\\x00by\\"tes"'),
    ("local10", False, "{42}"),
    ("local11", False, "[0, 1, 2, 3, 4, 5, …] (1000 items)"),
    ("local12", False, None),
    ("local13", False, str(-(2**100))),
    ("local14", False, "1.0"),
    ("local15", False, "(7,)"),
    ("local16", False, "frozenset()"),
    ("local17", False, "-7"),
    ("local18", False, "0"),
    ("local19", False, "False"),
]


@pytest.fixture(scope="module")
def local_vars(interp):
    with running_target(interp, SCRIPT) as proc:
        yield proc


def dump_locals_json(pid: int) -> dict:
    rc, out, err = run_gilty("dump", "--pid", pid, "--locals", "--format", "json", timeout=30)
    assert rc == 0, f"gilty dump --locals exited {rc}; stderr:\n{err}"
    assert "Traceback" not in err, err
    return parse_json(out, "gilty dump --locals --format json")


# Guards: wrong slot names or order (co_localsplusnames / co_varnames+cellvars), arguments not told
# from locals, wrong reprs of builtins, strings not cut or cut inside a character, and the target
# left changed by the reads.
def test_locals_of_known_frames(interp, local_vars):
    before = settled_state(local_vars.pid)
    dump = dump_locals_json(local_vars.pid)
    thread = thread_named(dump, "locals-thread")
    assert "locals_error" not in thread, thread["locals_error"]
    top, second = thread["stack"][0], thread["stack"][1]
    assert (top["function"], top["line"]) == ("local_variable_lookup", line_of(SCRIPT, "lookup")), top
    assert (second["function"], second["line"]) == ("caller", line_of(SCRIPT, "caller")), second

    got = [(v["name"], v["arg"], v["repr"]) for v in top["locals"]]
    assert [g[:2] for g in got] == [e[:2] for e in EXACT_LOOKUP], got
    for (name, _, want), (_, _, repr_) in zip(EXACT_LOOKUP, got):
        if want is not None:
            assert repr_ == want, (name, repr_, want)
    reprs = {name: r for name, _, r in got}
    assert reprs["local6"].startswith('("' + "-" * 80 + '…" (115 chars), {"key": {"key": '), reprs["local6"]
    # The long non-ASCII string: first characters intact, cut with the marker and its length.
    assert reprs["local7"].startswith('"测试1测试1'), reprs["local7"]
    assert reprs["local7"].endswith('…" (3000 chars)'), reprs["local7"]
    assert reprs["local12"].startswith("<Opaque at 0x"), reprs["local12"]

    # *args, keyword-only and **kwargs are arguments in co_varnames order; a cell shows its contents.
    got = [(v["name"], v["arg"], v["repr"]) for v in second["locals"]]
    assert [g[:2] for g in got] == [
        ("first", True),
        ("flag", True),
        ("rest", True),
        ("options", True),
        ("inner", False),
        ("captured", False),
    ], got
    reprs = {name: r for name, _, r in got}
    assert (reprs["first"], reprs["flag"], reprs["rest"], reprs["options"], reprs["captured"]) == (
        "1",
        "2",
        "(2, 3)",
        '{"extra": "x"}',
        '"in a cell"',
    ), reprs
    assert reprs["inner"].startswith("<function at 0x"), reprs["inner"]

    # Every frame of every thread got its variables (the module frame has none: its names are globals).
    for t in dump["threads"]:
        assert all("locals" in f and f["locals"] is not None for f in t["stack"]), t

    after = settled_state(local_vars.pid)
    assert local_vars.alive() and after == before, (before, after)


# Guards: the text form leaving out the variables or mixing arguments into the locals.
def test_text_dump_lists_arguments_then_locals(interp, local_vars):
    rc, out, err = run_gilty("dump", "--pid", local_vars.pid, "--locals", timeout=30)
    assert rc == 0, err
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("local_variable_lookup ("))
    block = [line.strip() for line in lines[at + 1 : at + 1 + 2 + len(EXACT_LOOKUP)]]
    assert block[:4] == ["Arguments:", 'arg1: "foo"', "arg2: None", "arg3: True"], block
    assert block[4:6] == ["Locals:", "local1: [-1234, 5678]"], block


# Guards: --locals changing the plain dump (no variables without the flag).
def test_plain_dump_has_no_locals(interp, local_vars):
    rc, out, err = run_gilty("dump", "--pid", local_vars.pid, "--format", "json", timeout=30)
    assert rc == 0, err
    dump = parse_json(out, "gilty dump --format json")
    assert all("locals" not in f for t in dump["threads"] for f in t["stack"])


@pytest.fixture(scope="module")
def spinners(interp):
    with running_target(interp, "spinners.py") as proc:
        yield proc


# Guards: threads that run on while their variables are read (the stack read first, the variables
# after) making the dump fail, hang or pair one moment's stack with another's variables.
def test_locals_of_running_threads(interp, spinners):
    for _ in range(3):
        dump = dump_locals_json(spinners.pid)
        for name in ("spinner-1", "spinner-2"):
            thread = thread_named(dump, name)
            if "locals_error" in thread:
                assert "kept moving" in thread["locals_error"], thread
                continue
            top = thread["stack"][0]
            assert top["function"] == "spin_forever", top
            assert [v["name"] for v in top["locals"]] == ["x"] and int(top["locals"][0]["repr"]) >= 0, top
            assert top["line"] == top["position"]["line"] if top["position"] else True, top


# NumPy scalars by value, as py-spy reads them (issue 31, item 19): each scalar type's value follows
# its object header; a type gilty does not read by value (float16, complex) stays `<type at 0x…>`.
# The bug: every one read `<numpy.int8 at 0x…>`.
NUMPY_SCALARS = {
    "flag": "True",
    "byte": "2",
    "i8": "3",
    "i16": "42",
    "i32": "43",
    "i64": "-44",
    "u8": "45",
    "u16": "46",
    "u32": "7",
    "u64": str(2**64 - 1),
    "f32": "0.5",
    "f32_inexact": "0.7",
    "f64": "0.7",
}


def test_numpy_scalars_by_value(interp):
    one_version(interp, "NumPy's scalar layout is the same on every Python version")
    from package_venvs import venv_python
    from test_numpy_states import _numpy_pin

    python = venv_python(interp, "numpy", (_numpy_pin(interp),), "import numpy")
    with running_target(python, "numpy_scalars.py") as target:
        dump = dump_locals_json(target.pid)
    top = dump["threads"][0]["stack"][0]
    assert top["function"] == "scalar_locals", top
    reprs = {v["name"]: v["repr"] for v in top["locals"]}
    assert {name: reprs.get(name) for name in NUMPY_SCALARS} == NUMPY_SCALARS, reprs
    assert reprs["half"].startswith("<numpy.float16 at 0x"), reprs
    assert reprs["cplx"].startswith("<numpy.complex128 at 0x"), reprs
