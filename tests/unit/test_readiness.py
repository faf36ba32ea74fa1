"""The free-threading bound's arithmetic (gilty.readiness.bound), the verdict's thresholds, module
packages and the saved form (docs/free-threading.md)."""

import math

import pytest
from gilty._errors import UsageError
from gilty.readiness.analysis import DEFAULT_SLOWDOWN, parse_slowdown, pct, readiness
from gilty.readiness.bound import ThreadShares, estimate
from gilty.readiness.model import ModuleInfo
from gilty.readiness.modules import package_of, scan_from_raw
from gilty.sampling.session import Session
from synthetic import contention_session


def shares(name="t", seconds=10.0, holding=0.0, waiting=0.0, native=0.0, cpu_wait=0.0, idle=None, tid=None):
    if idle is None:
        idle = 1.0 - holding - waiting - native - cpu_wait
    return ThreadShares(tid or hash(name) % 1000, name, seconds, holding, waiting, native, cpu_wait, idle)


def test_two_spinners_on_two_cpus():
    """Half holding, half waiting each: without the GIL each runs all the time, 10 % slower."""
    b = estimate([shares("a", holding=0.5, waiting=0.5), shares("b", holding=0.5, waiting=0.5)], cpus=2, slowdown=0.1)
    assert b.throughput_high == pytest.approx(1 / 0.55 - 1)  # +81.8 %
    assert b.throughput_low == pytest.approx(b.throughput_high)  # no waits for a CPU: one answer
    assert b.gil_wait_s == pytest.approx(10.0)
    assert b.gil_cost == pytest.approx(0.5)
    assert b.serial_s == pytest.approx(5.5)
    assert b.cpu_s == pytest.approx(11.0)


def test_four_spinners_on_two_cpus_are_capped_by_the_cpus():
    """Each alone would go 1/0.275 faster; four need 1.1 CPU-s per second of work on 2 CPUs."""
    threads = [shares(f"s{i}", holding=0.25, waiting=0.75) for i in range(4)]
    b = estimate(threads, cpus=2, slowdown=0.1)
    assert b.limited_by == "cpus"
    assert b.throughput_high == pytest.approx(2 / 1.1 - 1)
    one_cpu = estimate(threads, cpus=1, slowdown=0.1)
    assert one_cpu.throughput_high == pytest.approx(1 / 1.1 - 1)  # slower: the GIL cost nothing on 1 CPU


def test_one_thread_only_pays_the_slowdown():
    b = estimate([shares("main", holding=1.0)], cpus=8, slowdown=0.1)
    assert b.throughput_high == pytest.approx(1 / 1.1 - 1)  # -9.1 %
    assert b.gil_cost == 0.0


def test_idle_threads_weigh_nothing():
    """A main thread in join() does no work: the spinners' gain is the process's."""
    spinners = [shares("a", holding=0.5, waiting=0.5), shares("b", holding=0.5, waiting=0.5)]
    with_main = estimate(spinners + [shares("main", idle=1.0)], cpus=2, slowdown=0.1)
    assert with_main.throughput_high == pytest.approx(estimate(spinners, cpus=2, slowdown=0.1).throughput_high)
    assert with_main.working_threads == 2


def test_io_threads_gain_nothing():
    threads = [shares(f"io{i}", holding=0.01, waiting=0.001) for i in range(8)]
    b = estimate(threads, cpus=2, slowdown=0.1)
    assert abs(b.throughput_high) < 0.01
    assert b.latency_low < 0.01


def test_waits_for_a_cpu_lower_only_the_low_end():
    """On a saturated host the waits for a CPU count as CPU the process needs at the low end."""
    threads = [shares("a", holding=0.3, waiting=0.3, cpu_wait=0.4), shares("b", holding=0.3, waiting=0.3, cpu_wait=0.4)]
    b = estimate(threads, cpus=2, slowdown=0.0)
    assert b.throughput_high == pytest.approx(1 / 0.7 - 1)
    assert b.throughput_low == pytest.approx(2 / 1.4 - 1)  # (0.6 + 0.8) CPU-s per second on 2 CPUs
    assert b.throughput_low <= b.throughput_high


def test_native_time_counts_as_cpu():
    threads = [shares(f"n{i}", holding=0.1, waiting=0.4, native=0.5) for i in range(4)]
    b = estimate(threads, cpus=2, slowdown=0.0)
    assert b.cpu_s == pytest.approx(4 * 10 * 0.6)
    assert b.throughput_high == pytest.approx(2 / 2.4 - 1)  # the CPUs, not the GIL, bound it


def test_the_slowdown_lowers_the_gain():
    threads = [shares("a", holding=0.5, waiting=0.5), shares("b", holding=0.5, waiting=0.5)]
    gains = [estimate(threads, 2, s).throughput_high for s in (0.0, 0.1, 0.4)]
    assert gains == sorted(gains, reverse=True)
    assert gains[0] == pytest.approx(1.0)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        estimate([], cpus=0, slowdown=0.1)
    with pytest.raises(ValueError):
        estimate([], cpus=1, slowdown=-0.1)
    empty = estimate([], cpus=1, slowdown=0.1)
    assert empty.throughput_high == 0.0 and empty.serial_tid is None and not math.isnan(empty.gil_cost)


def test_percentages_never_read_minus_zero():
    assert pct(-0.001) == "0 %"
    assert pct(0.53) == "+53 %"
    assert pct(-0.09) == "-9 %"


def test_slowdown_option():
    assert parse_slowdown("10%") == pytest.approx(0.10)
    assert parse_slowdown(" 25 ") == pytest.approx(0.25)
    for bad in ("lots", "-5%", "400%", ""):
        with pytest.raises(UsageError):
            parse_slowdown(bad)


def test_packages_from_paths():
    assert package_of("/v/lib/python3.12/site-packages/numpy/core/_multiarray.cpython-312.so", False) == "numpy"
    assert package_of("/usr/lib/python3/dist-packages/yaml/_yaml.cpython-311.so", False) == "yaml"
    assert package_of("/v/lib/python3.12/site-packages/_cffi_backend.cpython-312-x86_64-linux-gnu.so", False) == "_cffi_backend"
    assert package_of("/usr/lib/python3.12/lib-dynload/_json.cpython-312.so", False) == "stdlib"
    assert package_of("/usr/bin/python3.14", True) == "builtin"
    assert package_of("/tmp/x/gil_free.so", False) == ""
    assert package_of(None, False) == ""


def test_sys_and_builtins_never_block():
    sys_mod = ModuleInfo("sys", "single-phase", "undeclared", "/usr/bin/python3.13", True, "builtin")
    ext = ModuleInfo("_ext", "single-phase", "undeclared", "/x/_ext.so", False, "")
    assert not sys_mod.blocks and ext.blocks
    assert not ModuleInfo("_ok", "multi-phase", "not_used", None, False, "").blocks


def _with_modules(session: Session, version: str, modules: list) -> Session:
    session.target.python_version = version
    raw = {"modules": modules, "unreadable": 0, "first_error": None}
    session.free_threading = {"slowdown": 0.1, "modules": raw, "modules_error": None}
    return session


def _module(name, gil, init="multi-phase", builtin=False):
    return {
        "name": name,
        "def_name": name,
        "init": init,
        "gil": gil,
        "unknown_why": None,
        "path": f"/x/{name}.so",
        "builtin": builtin,
        "package": "pkg",
        "dist": None,
    }


def test_verdict_names_the_blocking_modules():
    session, _ = contention_session()
    r = readiness(
        _with_modules(session, "3.13.0", [_module("_fast", "not_used"), _module("_slow", "undeclared", "single-phase")])
    )
    assert r.modules.known
    assert [m.name for m in r.modules.blockers] == ["_slow"]
    if r.worth:
        assert r.verdict.startswith("worth trying: up to ") and "these modules block it: _slow (pkg)" in r.verdict
    else:
        assert r.verdict.startswith("not worth it: the GIL costs under ")
        assert any("_slow (pkg)" in reason for reason in r.reasons)
    assert r.assumptions[0] == "no new contention on other locks"


def test_before_3_13_the_modules_are_unknown():
    session, _ = contention_session()
    r = readiness(_with_modules(session, "3.12.1", [_module("_x", "unknown")]))
    assert not r.modules.known and r.modules.blockers == []
    assert any("unknown before 3.13" in text for text in [r.verdict, *r.reasons])


def test_default_slowdown_and_saved_form_round_trip():
    session, _ = contention_session()
    assert readiness(session).slowdown == DEFAULT_SLOWDOWN
    _with_modules(session, "3.14.0", [_module("_slow", "used")])
    again = Session.from_dict(session.to_dict())
    assert again.free_threading == session.free_threading
    broken = session.to_dict()
    broken["free_threading"] = {"slowdown": "fast"}
    with pytest.raises(ValueError):
        Session.from_dict(broken)


def test_torn_scan_is_marked_partial():
    scan = scan_from_raw({"modules": [], "unreadable": 2, "first_error": "_x: implausible"}, "3.13.0")
    assert scan.note.startswith("partial: 2 module(s) did not read")
    assert scan_from_raw(None, "3.13.0", "pid 1 exited").note == "pid 1 exited"


def test_the_module_table_lists_blockers_then_the_applications_modules_before_the_standard_librarys():
    from types import SimpleNamespace

    from gilty.readiness.model import ModuleInfo, ModuleScan
    from gilty.report.recording.readiness import _module_rows

    def mod(name, gil, package):
        return ModuleInfo(name, "multi-phase", gil, f"/x/{name}.so", False, package)

    scan = ModuleScan(
        [mod("_bisect", "not_used", "stdlib"), mod("numpy_core", "not_used", "numpy"), mod("zlib_ext", "undeclared", "zext")],
        python_version="3.13.0",
    )
    rows = [row.split()[0] for row in _module_rows(SimpleNamespace(modules=scan))[1:]]
    assert rows == ["zlib_ext", "numpy_core", "_bisect"], rows
