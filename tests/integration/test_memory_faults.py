"""`gilty memory --faults` (issue 32, item 5) on a preloaded fork server (tests/targets/fault_server.py):
two workers copy the master's pages in two known functions, `touch_prices` (reference-count writes on
shared floats) and `collect_all` (a full collection writing the GC header of shared lists). Both must
be named, the second marked as garbage collection, and their shares of the copied bytes must be
within 20 % of what the kernel counted for each phase (each worker's Private_Dirty growth across the
phase, /proc/self/smaps_rollup read by the worker itself between the phases).

The attribution reads nothing version-specific beyond the stack and GC-flag reads, which are tested
per version elsewhere: pyenv 3.12 and 3.13 only (suite time); 3.10, 3.14 and 3.15 were checked by
hand (docs/memory-faults.md).
"""

from __future__ import annotations

import subprocess

import pytest
from conftest import assert_one_error_line, gilty_command, gilty_env, note, one_version
from fault_server_support import fault_server_run

MIB = 1 << 20
TOLERANCE = 0.20
BROKEN_JOIN_S = 0.010  # a median join lag this long means faults are joined with unrelated stack reads
# 3.12, and 3.13 for its other GC (the young generation and the collector's own C functions differ).
CHECKED_ON = ("3.12", "3.13")


def _share_error(measured: float, reference: float) -> float:
    return abs(measured - reference) / reference


@pytest.fixture(scope="module")
def fault_run(interp):
    if interp.path is None:
        pytest.skip(interp.skip_reason)
    if interp.id.startswith("debian") or interp.minor_str not in CHECKED_ON:
        pytest.skip(
            "the attribution reads only the stack and the GC flag, tested per version elsewhere: "
            "checked on pyenv 3.12 and 3.13 only (suite time)"
        )
    with fault_server_run(interp.path, ("--faults",)) as (rc, report, err, results, master, workers):
        assert rc == 0 and report, f"gilty memory exited {rc}:\n{err}"
        yield report, workers, results, master


def _by_function(report: dict) -> dict:
    return {f["function"]: f for f in report["faults"]["functions"]}


@pytest.mark.interpreter
def test_both_copying_functions_are_named_with_gc_marked(interp, fault_run):
    report, workers, _, _ = fault_run
    faults = report["faults"]
    assert faults["errors"] == [] and set(faults["workers"]) >= set(workers), faults
    funcs = _by_function(report)
    assert "touch_prices" in funcs and "collect_all" in funcs, list(funcs)
    # The two known functions copied nearly everything (the rest: the workers' own start-up and
    # the phase boundaries).
    top_two = funcs["touch_prices"]["share"] + funcs["collect_all"]["share"]
    note(interp, "faults: share of the two functions", round(top_two, 3))
    assert top_two >= 0.85, faults["functions"][:5]
    assert funcs["collect_all"]["gc_bytes"] >= 0.9 * funcs["collect_all"]["bytes"], funcs["collect_all"]
    assert funcs["touch_prices"]["gc_bytes"] <= 0.05 * funcs["touch_prices"]["bytes"], funcs["touch_prices"]
    # Both workers' faults were seen.
    assert set(faults["per_worker_bytes"]) == {str(w) for w in workers}, faults["per_worker_bytes"]


@pytest.mark.interpreter
def test_shares_match_what_the_kernel_counted(interp, fault_run):
    report, _, results, _ = fault_run
    funcs = _by_function(report)
    touch_ref = sum(r["touch_bytes"] for r in results)
    collect_ref = sum(r["collect_bytes"] for r in results)
    touch, collect = funcs["touch_prices"]["bytes"], funcs["collect_all"]["bytes"]
    share_ref = touch_ref / (touch_ref + collect_ref)
    share = touch / (touch + collect)
    note(interp, "faults: touch_prices MiB gilty", round(touch / MIB, 1))
    note(interp, "faults: touch_prices MiB kernel", round(touch_ref / MIB, 1))
    note(interp, "faults: collect_all MiB gilty", round(collect / MIB, 1))
    note(interp, "faults: collect_all MiB kernel", round(collect_ref / MIB, 1))
    note(interp, "faults: touch_prices share gilty", round(share, 3))
    note(interp, "faults: touch_prices share kernel", round(share_ref, 3))
    assert _share_error(share, share_ref) <= TOLERANCE, (share, share_ref)
    assert _share_error(1 - share, 1 - share_ref) <= TOLERANCE, (share, share_ref)
    # And the bytes themselves.
    assert _share_error(touch, touch_ref) <= TOLERANCE, (touch, touch_ref)
    assert _share_error(collect, collect_ref) <= TOLERANCE, (collect, collect_ref)


@pytest.mark.interpreter
def test_the_workers_gc_split_is_the_faults_and_matches_the_kernel(interp, fault_run):
    # The page scans put the touch 0.1 s before the collection in the collection's interval: they read
    # 16.5 of a worker's 16.8 MiB as GC where the worker counted 9.2 MiB touched. With --faults the
    # split is the faults', and the summary names the cause from it.
    report, workers, results, _ = fault_run
    by_pid = {p["pid"]: p["cow"] for p in report["processes"]}
    for r in results:
        cow = by_pid[r["pid"]]
        assert cow["gc_split_by"] == "page faults" and cow["ambiguous_bytes"] == 0, cow
        outside_share = cow["outside_gc_bytes"] / (cow["outside_gc_bytes"] + cow["during_gc_bytes"])
        truth = r["touch_bytes"] / (r["touch_bytes"] + r["collect_bytes"])
        note(interp, "faults: worker outside-GC share of its copies gilty", round(outside_share, 3))
        note(interp, "faults: worker outside-GC share of its copies kernel", round(truth, 3))
        assert _share_error(outside_share, truth) <= TOLERANCE, (cow, r)
    assert not any("is an estimate" in line for line in report["summary"]), report["summary"]


@pytest.mark.interpreter
def test_the_flame_graph_and_the_join_are_reported(interp, fault_run, tmp_path):
    report, _, _, _ = fault_run
    faults = report["faults"]
    collapsed = faults["collapsed"]
    in_gc = [line.rsplit(" ", 1)[0].split(";")[-3:-1] for line in collapsed if "[garbage collection]" in line]
    assert any(a.startswith("collect_all (fault_server.py:") and b == "[garbage collection]" for a, b in in_gc), collapsed[:5]
    assert any("touch_prices (fault_server.py:" in line and "[garbage collection]" not in line for line in collapsed)
    join = faults["join"]
    note(interp, "faults: join lag p50 us", round(join["lag_p50_s"] * 1e6))
    note(interp, "faults: join lag p99 us", round(join["lag_p99_s"] * 1e6))
    note(interp, "faults: sampled faults per s", round(faults["cost"]["samples_per_s"]))
    # The lag's size is a figure (docs/memory-faults.md: median 0.1 ms, 1.6 ms in a CI run's parallel
    # part), not a pass mark: the attribution it affects is checked above and in the tests before.
    # The bound is a join that is broken, joining with reads far from the fault.
    assert join["lag_p50_s"] < BROKEN_JOIN_S, join
    assert faults["lost_records"] == 0, faults


def test_fault_period_without_faults_is_a_usage_error():
    done = subprocess.run(
        gilty_command() + ["memory", "--pid", "1", "--fault-period", "4"],
        capture_output=True,
        text=True,
        env=gilty_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert "--fault-period needs --faults" in assert_one_error_line(done.stderr)


@pytest.mark.interpreter
def test_refused_perf_events_stop_the_run_in_one_line(interp, fault_run, deny_perf):
    """Under a seccomp filter refusing perf_event_open (as a container's profile can), --faults says
    what to change and exits 6 before measuring; the server is untouched."""
    one_version(interp, "the refusal comes before any version-specific read")
    _, workers, _, master = fault_run
    done = subprocess.run(
        [deny_perf, *gilty_command(), "memory", "--pid", str(master), "--faults", "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=gilty_env(),
    )
    line = assert_one_error_line(done.stderr)
    assert done.returncode == 6, (done.returncode, done.stderr)
    assert "--faults" in line and "CAP_PERFMON" in line and "perf_event_paranoid" in line, line
    assert not done.stdout.strip()
    for pid in workers:
        assert open(f"/proc/{pid}/stat").read().split()[2] in "RS", pid
