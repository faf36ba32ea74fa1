"""gilty's reading of adaptive bytecode against the interpreter's own account of it.

The target warms sites with known behaviour, writes `dis.get_instructions(code, adaptive=True)` and the
raw `_co_code_adaptive` bytes of each hot function, and stops itself (SIGSTOP): gilty reads the same
code objects from outside and must agree instruction for instruction, names and counters.
"""

from __future__ import annotations

import json
import os
import tempfile

import pytest
from conftest import running_target

pytestmark = pytest.mark.interpreter

SCRIPT = "specialization_sites.py"


def skip_unless_adaptive(interp) -> None:
    if interp.version[:2] < (3, 11):
        pytest.skip(f"Python {interp.minor_str} has no specializing interpreter (PEP 659 is 3.11+)")


@pytest.fixture(scope="module")
def snapshot(interp):
    """(ground truth written by the stopped target, gilty's reading of each hot code object)."""
    skip_unless_adaptive(interp)
    from gilty import _native

    fd, path = tempfile.mkstemp(prefix="gilty-spec-", suffix=".json")
    os.close(fd)
    try:
        with running_target(interp.path, SCRIPT, "snapshot", path, "20") as proc:
            truth = json.loads(open(path).read())
            assert truth["pid"] == proc.pid
            read = {name: _native.specialization_read_code(proc.pid, f["address"]) for name, f in truth["functions"].items()}
            yield truth["functions"], read
    finally:
        os.unlink(path)


def test_names_offsets_and_args_match_dis(snapshot):
    truth, read = snapshot
    for name, f in truth.items():
        want = [(i["offset"], i["opname"], i["arg"]) for i in f["instructions"]]
        # dis gives arg None for opcodes without an argument; gilty always decodes the byte.
        has_arg = {i["offset"] for i in f["instructions"] if i["arg"] is not None}
        got = [(i["offset"], i["name"], i["oparg"] if i["offset"] in has_arg else None) for i in read[name]["instructions"]]
        assert got == want, f"{name}: gilty {got} != dis {want}"
        assert read[name]["qualname"] == name


def test_counters_match_the_raw_bytes(snapshot):
    truth, read = snapshot
    sites = 0
    for name, f in truth.items():
        raw = bytes.fromhex(f["raw"])
        for ins in read[name]["instructions"]:
            if ins["counter"] is None:
                continue
            sites += 1
            word = int.from_bytes(raw[ins["offset"] + 2 : ins["offset"] + 4], "little")
            assert ins["counter"] == word, f"{name}+{ins['offset']} {ins['name']}: gilty {ins['counter']} != {word}"
    assert sites >= len(truth), "every hot function has at least one specializable site"


def site(read: dict, function: str, family: str) -> dict:
    found = [i for i in read[function]["instructions"] if i["family"] == family]
    assert len(found) == 1, f"{function}: {family} sites {found}"
    return found[0]


def test_known_sites_have_their_measured_forms(snapshot, interp):
    """Forms per version as measured in the research notes; misses read from the counter."""
    _, read = snapshot
    minor = interp.version[1]
    mono = site(read, "mono_attr", "LOAD_ATTR")
    assert (mono["name"], mono["form"], mono["misses_since_specialized"]) == ("LOAD_ATTR_INSTANCE_VALUE", "specialized", 0)
    # Two classes alternating keep a specialized name while missing half the time: the counter shows it.
    alt = site(read, "alternating", "LOAD_ATTR")
    assert alt["form"] == "specialized" and alt["misses_since_specialized"] > 0, alt
    mix = site(read, "mix_90_10", "LOAD_ATTR")
    assert mix["form"] == "specialized" and mix["misses_since_specialized"] > 0, mix
    fallback = site(read, "getattr_fallback", "LOAD_ATTR")
    if minor >= 14:
        # An attribute neither the class nor the instance has (served by __getattr__) takes the
        # cooldown count instead of backing off (3.14+ specialize.c, the ABSENT case): generic path,
        # retried every 52 executions with backoff exponent 0, never "warming".
        assert fallback["form"] == "backoff" and fallback["backoff"] == 0 and fallback["counter_value"] <= 52, fallback
    else:
        assert fallback["form"] == "backoff" and fallback["backoff"] > 1, fallback
    prop = site(read, "property_read", "LOAD_ATTR")
    if minor == 11:
        assert (prop["name"], prop["form"]) == ("LOAD_ATTR_ADAPTIVE", "backoff")
    else:
        assert (prop["name"], prop["form"]) == ("LOAD_ATTR_PROPERTY", "specialized")
    mixed = site(read, "int_float", "BINARY_OP")
    if minor >= 14:
        # 3.14 specializes int + float too (BINARY_OP_EXTEND, the interpreter's name in dis above).
        assert (mixed["name"], mixed["form"], mixed["misses_since_specialized"]) == ("BINARY_OP_EXTEND", "specialized", 0), mixed
    else:
        assert mixed["form"] == "backoff", mixed
    length = site(read, "builtin_len", "PRECALL" if minor == 11 else "CALL")
    assert length["form"] == "specialized" and "LEN" in length["name"], length
    # Rebinding a module global keeps its dict keys: LOAD_GLOBAL_MODULE stays specialized, no misses.
    glob = site(read, "use_global", "LOAD_GLOBAL")
    assert (glob["name"], glob["misses_since_specialized"]) == ("LOAD_GLOBAL_MODULE", 0)
