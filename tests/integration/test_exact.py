"""`gilty record --exact`: exact figures against the sampler's, the switch interval, GC, safety, refusal.

Every recording runs a target with few threads for a few seconds at 1000 Hz, then kills it, so only
one target burns CPU at a time; each (interpreter, case) is recorded once per module. Removing the
probes is tested in test_exact_close.py.
Measured values are kept with ``note`` and printed at the end of the session; the thresholds and what
was measured on the 2-CPU dev box are in docs/exact.md, "## Accuracy".
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    DEBIAN_PYTHON,
    gilty_command,
    gilty_env,
    note,
    one_version,
    parse_json,
    run_gilty,
    running_target,
    settled_state,
    task_ids,
    thread_named,
)

pytestmark = [pytest.mark.interpreter, pytest.mark.perf, pytest.mark.alone]

RATE_HZ = 1000
DURATION_S = 5.0  # sampler vs exact
SWITCH_DURATION_S = 2.0  # the extra switch-interval records
GC_DURATION_S = 3.0
TOLERANCE = 0.03  # sampled vs exact, in fractions of the record (3 percentage points)
# A starved sampler (more than STARVED_LATE_SHARE of its slots skipped because passes overran: 2 CPUs
# shared with busy target threads) counts passes, not time, and leans toward the states its late
# passes land in: measured up to 3.2 points on spinners with 18% of slots late. Then allow 5 points.
STARVED_LATE_SHARE = 0.10
STARVED_TOLERANCE = 0.05
# A starved target: a thread runnable without a CPU this share of the record or more. Its passes then
# lean on the kernel's run-delay counters, which move in ~4 ms steps every ~32 ms here (docs/states.md,
# "coarse scheduler counters"), to split that time into held and waited: beside eight CPU hogs, 3.10's
# spinners spent 0.62-0.64 so and read 3.2-4.2 points off exact, 3.13's GC spinner, at 0.52, 3.1 points.
STARVED_CPU_WAIT = 0.25


def tolerance_for(report: dict, thread: dict = None) -> float:
    late, samples = report["errors"]["late"], report["samples"]
    starved_target = thread is not None and thread["states"].get("cpu_wait", 0.0) >= STARVED_CPU_WAIT
    return STARVED_TOLERANCE if starved_target or late > STARVED_LATE_SHARE * (late + samples) else TOLERANCE


EXIT_EXACT_UNAVAILABLE = 9


def exact_skip_reason() -> str:
    """Why exact mode cannot run here at all (empty if it can)."""
    if os.geteuid() != 0:
        return "exact mode needs root (perf_event_open uprobes)"
    if not Path("/sys/bus/event_source/devices/uprobe/type").exists():
        return "kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe)"
    return ""


@pytest.fixture(scope="module")
def pyenv_interp(interp):
    """``interp`` for the exact-mode tests: pyenv builds only (Debian's python3.11 has no symbols)."""
    if interp.id.startswith("debian"):
        pytest.skip("Debian's python3.11 is stripped: exact mode refuses it (test_refusal_on_stripped_debian_python)")
    reason = exact_skip_reason()
    if reason:
        pytest.skip(reason)
    return interp


def record_exact(pid: int, duration: float, rate: float = RATE_HZ, label: str = "") -> dict:
    """``gilty record --exact --format json``; fails the test unless it exits 0 with a complete exact part.

    With GILTY_EXACT_DUMP=DIR set, each report is also written to DIR/<label>.json for a closer look.
    """
    started = time.monotonic()
    rc, out, err = run_gilty(
        "record", "--exact", "--pid", pid, "--duration", duration, "--rate", rate, "--format", "json", timeout=90
    )
    assert rc == 0, f"gilty record --exact exited {rc}; stderr:\n{err}"
    report = parse_json(out, "gilty record --exact --format json")
    report["_elapsed_s"] = time.monotonic() - started
    dump = os.environ.get("GILTY_EXACT_DUMP")
    if dump and label:
        os.makedirs(dump, exist_ok=True)
        Path(dump, f"{label}.json").write_text(json.dumps(report, indent=1))
    ov = report["exact_overhead"]
    assert ov is not None and report["gc_exact"] is not None, {k: report.get(k) for k in ("exact_overhead", "gc_exact")}
    assert ov["lost"] == 0, ov
    return report


def run_delays(pid: int) -> dict:
    """{tid: (seconds spent runnable but waiting for a CPU, times run on a CPU)} from schedstat."""
    out = {}
    for tid in task_ids(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                _on_cpu, delay_ns, slices = (int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
        out[tid] = (delay_ns / 1e9, slices)
    return out


def record_with_run_delays(pid: int, duration: float, label: str) -> dict:
    """``record_exact``, plus report["_run_delay"] = {tid: (run delay s, slices)} over the record: how
    long the machine kept each thread of the target from a CPU while it was recorded."""
    before, started = run_delays(pid), time.monotonic()
    report = record_exact(pid, duration, label=label)
    after = run_delays(pid)
    report["_run_delay_over_s"] = time.monotonic() - started  # gilty's start-up and exit included
    report["_run_delay"] = {
        tid: (after[tid][0] - before[tid][0], after[tid][1] - before[tid][1]) for tid in after if tid in before
    }
    return report


def sampled_and_exact(thread: dict, case: str = "") -> dict:
    """{"hold": (sampled, exact), "wait": (sampled, exact)} as fractions of the record."""
    s, e = thread["states"], thread["exact"]
    exact_hold = e["hold_fraction"] if e else 0.0  # null: no GIL event at all during the record
    # The sampler's waiting_gil covers both take_gil and drop_gil's wait for the requester.
    exact_wait = e["wait_fraction"] + e["handoff_fraction"] if e else 0.0
    # Exact tracing does not see the CPU: a holder preempted by the kernel still holds the GIL, and a
    # thread that always wants the GIL, runnable without a CPU and not holding it, is in take_gil
    # (woken, not yet run) or drop_gil. The sampler calls both cpu_wait (busy host, e.g. CI).
    held_cpu_wait = thread.get("cpu_wait_holding_gil") or 0.0
    held = s["holding_gil"] + s["gc"] + held_cpu_wait
    waited = s["waiting_gil"]
    if thread["name"] in ALWAYS_WANTING.get(case, ()):
        waited += max(0.0, s["cpu_wait"] - held_cpu_wait)
    return {"hold": (held, exact_hold), "wait": (waited, exact_wait)}


def unplaced_exact_time(thread: dict, case: str) -> float:
    """Time exact tracing cannot place, of a thread that always wants the GIL: neither holding it nor in
    take_gil or drop_gil, the few instructions between them, where a kernel that preempts the thread
    leaves it for as long as it is off its CPU. The sampler calls that cpu_wait and, the thread wanting
    the GIL, waiting: the sampled wait lies between the exact one and the exact one plus this, at most
    the thread's cpu_wait not holding (0 on a quiet machine; beside eight CPU hogs, 3.11's gc-churner,
    runnable without a CPU 0.57 of the record, left 0.045 of it unplaced)."""
    if thread["name"] not in ALWAYS_WANTING.get(case, ()) or not thread["exact"]:
        return 0.0
    e = thread["exact"]
    unplaced = 1.0 - e["hold_fraction"] - e["wait_fraction"] - e["handoff_fraction"]
    off_cpu = thread["states"]["cpu_wait"] - (thread.get("cpu_wait_holding_gil") or 0.0)
    return max(0.0, min(unplaced, off_cpu))


def unattributed_cpu_wait(thread: dict, case: str) -> float:
    """cpu_wait the comparison cannot place: not holding the GIL, of a thread that does not always
    want it (it may have been in take_gil or in its own native code when the kernel held it off)."""
    if thread["name"] in ALWAYS_WANTING.get(case, ()):
        return 0.0
    return max(0.0, thread["states"]["cpu_wait"] - (thread.get("cpu_wait_holding_gil") or 0.0))


# -- test 2: the sampler against exact tracing --------------------------------------------------

# case -> (target script, its args, thread names)
CASES = {
    "spinners": ("spinners.py", (), ("spinner-1", "spinner-2", "MainThread")),
    "cpu_and_io": ("exact_cpu_and_io_threads.py", ("0.005",), ("io1", "io2", "cpu1", "MainThread")),
    "native": ("exact_hasher_spinner.py", (), ("hasher", "spinner", "MainThread")),
    "gc": ("exact_gc_spinner.py", (), ("gc-churner", "spinner", "MainThread")),
}


class Recordings:
    """Each case recorded once per interpreter, on first use; the target is killed right after."""

    def __init__(self, interp) -> None:
        self.interp = interp
        self.reports: dict = {}
        self.failed: dict = {}

    def get(self, case: str) -> dict:
        if case in self.failed:
            pytest.fail(f"recording {case} failed earlier: {self.failed[case]}")
        if case not in self.reports:
            script, args, _names = CASES[case]
            try:
                with running_target(self.interp, script, *args) as proc:
                    time.sleep(0.3)  # steady state
                    report = record_with_run_delays(proc.pid, DURATION_S, label=f"{self.interp.id}-{case}")
                    report["_tids"] = task_ids(proc.pid)
            except BaseException as e:  # pytest.fail / AssertionError: do not record again for each test
                self.failed[case] = str(e)[:2000]
                raise
            self.reports[case] = report
            for t in report["threads"]:
                for what, (sampled, exact) in sampled_and_exact(t, case).items():
                    note(self.interp, f"{case}/{t['name']}: {what} sampled-exact", round(sampled - exact, 4))
        return self.reports[case]


@pytest.fixture(scope="module")
def recordings(pyenv_interp):
    return Recordings(pyenv_interp)


# Threads forced off the GIL wait inside drop_gil until the requester has it (FORCE_SWITCHING in
# Python/ceval_gil.c): exact mode measures that as handoff time (a drop_gil return probe), which the
# comparison adds to the exact wait. Before that probe existed this was a gap of up to 16 points.
KNOWN_GAPS: dict = {}


def _cases_threads_quantities():
    params = []
    for case, (_script, _args, names) in CASES.items():
        for name in names:
            for what in ("hold", "wait"):
                marks = []
                reason = KNOWN_GAPS.get((case, name, what))
                if reason:
                    marks.append(pytest.mark.xfail(reason=reason, strict=False))
                params.append(pytest.param(case, name, what, id=f"{case}-{name}-{what}", marks=marks))
    return params


# Guards: the sampler's per-thread GIL states disagreeing with what the probes measured exactly
# (misclassified waiters, GC or native code, or an exact mode that mis-pairs events). Sampled
# holding_gil+gc vs exact hold_fraction, sampled waiting_gil vs exact wait_fraction: within 3 points.
@pytest.mark.parametrize("case,name,what", _cases_threads_quantities())
def test_sampled_matches_exact(recordings, case, name, what):
    report = recordings.get(case)
    thread = thread_named(report, name)
    sampled, exact = sampled_and_exact(thread, case)[what]
    # A wait may hide in the cpu_wait the sampler cannot place: the exact figure lies between.
    spare = unattributed_cpu_wait(thread, case) if what == "wait" else 0.0
    gap = 0.0 if sampled <= exact <= sampled + spare else min(abs(exact - sampled), abs(exact - sampled - spare))
    # And an exact wait may miss a preempted thread's time between the GIL's functions.
    unplaced = unplaced_exact_time(thread, case) if what == "wait" else 0.0
    if exact <= sampled <= exact + unplaced:
        gap = 0.0
    elif sampled > exact:
        gap = min(gap, sampled - exact - unplaced)
    detail = f"{case}/{name} {what}: sampled {sampled:.4f} (+{spare:.4f} unplaced cpu_wait), exact {exact:.4f} (+{unplaced:.4f} unplaced by exact tracing) (states {thread['states']}, exact {thread['exact'] and {k: thread['exact'][k] for k in ('hold_fraction', 'wait_fraction', 'acquisitions', 'forced_switches')}})"
    # 3.10 runs its eval breaker after calls and on entering a frame too, so a thread forced off the GIL
    # can stand on any such instruction: until the sampler read the thread's recursion counter there
    # (FrameWalker::calls_in_progress), one not yet blocked was classified native (3-10% for the
    # gc-churner), which this used to let pass as an expected failure.
    assert gap <= tolerance_for(report, thread), f"{detail}; sampler: {report['samples']} passes, {report['errors']['late']} late"


# Threads that want the GIL all the time (pure-Python busy loops): what exact mode does not count as
# a hold is waiting in the sampler's sense (in take_gil, or forced off and waiting in drop_gil).
ALWAYS_WANTING = {
    "spinners": ("spinner-1", "spinner-2"),
    "cpu_and_io": ("cpu1",),
    "native": ("spinner",),
    "gc": ("gc-churner", "spinner"),
}


# Guards: the sampler's waiting_gil of CPU-bound threads disagreeing with the exact record, with the
# drop_gil ambiguity above taken out: sampled waiting_gil vs 1 - exact hold_fraction, within 3 points.
@pytest.mark.parametrize("case", list(ALWAYS_WANTING))
def test_sampled_wait_is_exact_non_hold(recordings, case):
    report = recordings.get(case)
    bad = []
    for name in ALWAYS_WANTING[case]:
        t = thread_named(report, name)
        sampled = sampled_and_exact(t, case)["wait"][0]
        non_hold = 1.0 - t["exact"]["hold_fraction"]
        note(recordings.interp, f"{case}/{name}: wait sampled-(1-hold)", round(sampled - non_hold, 4))
        if abs(sampled - non_hold) > tolerance_for(report, t):
            bad.append(f"{name}: sampled waiting_gil {sampled:.4f}, exact 1-hold {non_hold:.4f}, states {t['states']}")
    assert not bad, f"{bad} (sampler: {report['samples']} passes, {report['errors']['late']} late)"


# Guards: exact mode not attaching to every thread, or a recording that lost events or ran short.
@pytest.mark.parametrize("case", list(CASES))
def test_exact_covers_the_record(recordings, case):
    r = recordings.get(case)
    ov = r["exact_overhead"]
    note(recordings.interp, f"{case}: exact events/s", round(ov["events_per_s"]))
    note(recordings.interp, f"{case}: gilty run s", round(r["_elapsed_s"], 1))
    assert ov["threads_attached"] == len(r["_tids"]), (ov, r["_tids"])
    # wall_s runs from just before the probes go in to the end of sampling.
    assert r["duration_s"] <= ov["wall_s"] <= r["duration_s"] + 0.5, (ov["wall_s"], r["duration_s"])
    # Each probed function, maybe as a GCC clone ("take_gil.lto_priv.0") from a debug file ("(PATH)").
    assert {s.split(" ")[0].split(".")[0] for s in ov["symbols"]} >= {"take_gil", "drop_gil", "gc_collect_main"}, ov["symbols"]
    if recordings.interp.minor_str in ("3.14", "3.15"):
        # Debian's LTO builds release the GIL of a blocking call through a copy of drop_gil inlined
        # into PyEval_SaveThread: without a probe there every io thread would hold it while asleep.
        drop = next(s for s in ov["symbols"] if s.startswith("drop_gil"))
        assert "inlined copies" in drop and "PyEval_SaveThread" in drop, drop


# Guards: overlapping holds (one GIL, so the holds of all threads add up to at most the traced time).
# Fails when a thread blocked in take_gil at attach is credited a hold "from the start of tracing"
# (see test_exact_crosscheck.py::test_no_hold_invented_at_attach): its invented hold overlaps the
# real holder's.
@pytest.mark.parametrize("case", list(CASES))
def test_exact_holds_do_not_overlap(recordings, case):
    r = recordings.get(case)
    total_hold = sum(t["exact"]["hold_fraction"] for t in r["threads"] if t["exact"])
    note(recordings.interp, f"{case}: sum of exact hold fractions", round(total_hold, 4))
    longest = {t["name"]: t["exact"]["hold"]["max_s"] for t in r["threads"] if t["exact"]}
    assert total_hold <= 1.0 + 1e-3, f"holds add up to {total_hold:.4f} of the traced time; longest holds {longest}"


# -- test 3: the switch interval ------------------------------------------------------------

# Two intervals (the default shared with test 2, and twice it): enough to show the wait follows it.
SWITCH_INTERVALS = (0.005, 0.010)


@pytest.fixture(scope="module")
def switch_reports(recordings):
    """{interval: report} for exact_cpu_and_io_threads.py run with each switch interval (0.005 shared with test 2)."""
    out = {}
    for interval in SWITCH_INTERVALS:
        if interval == 0.005:
            out[interval] = recordings.get("cpu_and_io")
            continue
        with running_target(recordings.interp, "exact_cpu_and_io_threads.py", repr(interval)) as proc:
            time.sleep(0.3)
            out[interval] = record_with_run_delays(proc.pid, SWITCH_DURATION_S, label=f"{recordings.interp.id}-switch-{interval}")
    return out


# Guards: the report's switch interval not read from the target (e.g. a constant 5 ms), which would
# also skew forced-switch counts.
def test_switch_interval_is_the_targets(switch_reports):
    for interval, r in switch_reports.items():
        assert r["switch_interval_s"] == pytest.approx(interval, abs=1e-9), (interval, r["switch_interval_s"])


# Guards: exact waits mis-timed (wrong units, mis-paired entry/return, waits merged across wake-ups).
# An I/O thread woken from sleep waits one switch interval for the CPU thread to be asked to drop, so
# its median wait is about the interval: within +-30%, and it moves with it. Other jobs on the CPUs
# lengthen every wait by the time the I/O thread, or the CPU thread it waits on, sits runnable
# without a CPU: that is measured over the same record (/proc/PID/task/TID/schedstat). When an I/O
# thread waited more than IO_RUN_DELAY_SHARE of the interval per time slice, or the CPU thread (always
# runnable) sat without a CPU more than CPU_RUNNABLE_MAX of the time, the upper bound cannot hold and
# is skipped, with the figures. Measured on the shared 2-CPU box: with other engineers' jobs only,
# 0.12-0.60 ms per slice and 16-59 % runnable, p50 1.01-1.13x the interval; with 8 busy loops added,
# 1.6-7.7 ms and 93-96 %, p50 9-33 ms at both intervals. A wait never gets shorter on a busy machine:
# the lower bound holds always.
IO_RUN_DELAY_SHARE = 0.2
CPU_RUNNABLE_MAX = 0.75


def machine_delay(report: dict, interval: float) -> tuple:
    """(largest mean run delay per slice of an I/O thread, share of the time the CPU thread sat runnable)."""
    per_slice = []
    for name in ("io1", "io2"):
        delay, slices = report["_run_delay"].get(thread_named(report, name)["tid"], (0.0, 0))
        per_slice.append(delay / slices if slices else 0.0)
    cpu_delay, _ = report["_run_delay"].get(thread_named(report, "cpu1")["tid"], (0.0, 0))
    return max(per_slice), cpu_delay / report["_run_delay_over_s"]


def test_io_wait_p50_follows_the_switch_interval(pyenv_interp, switch_reports):
    p50 = {}
    busy = []
    for interval, r in switch_reports.items():
        io_delay, cpu_share = machine_delay(r, interval)
        measured = f"{interval * 1e3:g} ms: I/O thread run delay {io_delay * 1e3:.3f} ms per slice, CPU thread runnable {cpu_share:.1%} of the time"
        print(measured)
        if io_delay > IO_RUN_DELAY_SHARE * interval or cpu_share > CPU_RUNNABLE_MAX:
            busy.append(measured)
        for name in ("io1", "io2"):
            e = thread_named(r, name)["exact"]
            p50[(interval, name)] = e["wait"]["p50_s"]
            note(pyenv_interp, f"switch {interval * 1e3:g} ms: io wait p50/interval", round(e["wait"]["p50_s"] / interval, 3))
    shown = {f"{k[0] * 1e3:g} ms {k[1]}": f"{v * 1e3:.3f} ms" for k, v in p50.items()}
    print(f"io wait p50: {shown}")
    for (interval, name), value in p50.items():
        assert 0.7 * interval <= value, f"{name}: wait p50 {value * 1e3:.3f} ms at a {interval * 1e3:g} ms interval ({shown})"
    if busy:
        pytest.skip(f"the machine kept the target's threads from a CPU ({'; '.join(busy)}): waits {shown}")
    for (interval, name), value in p50.items():
        assert value <= 1.3 * interval, f"{name}: wait p50 {value * 1e3:.3f} ms at a {interval * 1e3:g} ms interval ({shown})"
    for name in ("io1", "io2"):
        assert p50[(0.005, name)] < p50[(0.010, name)], p50


# -- test 4: garbage collections --------------------------------------------------------------


def usr1_json(proc) -> dict:
    proc.popen.send_signal(signal.SIGUSR1)
    line = proc.read_line(5)
    assert line, f"{proc.script.name} did not answer SIGUSR1"
    return json.loads(line)


@pytest.fixture(scope="module")
def gc_report(pyenv_interp):
    with running_target(pyenv_interp, "exact_gc_collect.py") as proc:
        time.sleep(0.3)
        before = usr1_json(proc)
        report = record_exact(proc.pid, GC_DURATION_S, rate=500, label=f"{pyenv_interp.id}-gc-collect")
        after = usr1_json(proc)
    # gc.collect() calls per second, as the target made them (rounds take longer than 100 ms when the
    # box is busy): how many fell into the traced window.
    report["_calls_per_s"] = (after["calls"] - before["calls"]) / (after["t"] - before["t"])
    report["_target"] = after
    return report


# Guards: collections not traced, the generation argument or the return value misread (wrong
# register, sign), or collections given to the wrong thread.
def test_gc_collect_calls_are_generation_2_with_their_garbage(pyenv_interp, gc_report):
    r = gc_report
    cycles = r["_target"]["cycles"]
    assert r["_target"]["min_collected"] >= cycles, r["_target"]  # the target's own view
    closed = [c for c in r["gc_exact"]["collections"] if not c["open"]]
    gen2 = [c for c in closed if c["generation"] == 2]
    expected = r["_calls_per_s"] * r["exact_overhead"]["wall_s"]
    note(pyenv_interp, "gc: gen-2 collections / expected", round(len(gen2) / expected, 3))
    note(pyenv_interp, "gc: min collected by a gen-2 collection", min((c["collected"] for c in gen2), default=-1))
    note(pyenv_interp, "gc: gen-2 p50 pause ms", round(r["gc_exact"]["by_generation"].get("2", {}).get("p50_s", 0) * 1e3, 2))
    # Every gc.collect() in the window (the rate varies a little within the record) and no other.
    assert 0.8 * expected - 2 <= len(gen2) <= 1.2 * expected + 2, (len(gen2), expected)
    for c in gen2:
        assert c["collected"] is not None and c["collected"] >= cycles, c
        assert c["duration_s"] > 0, c
    # A collection takes 1.4-3 ms here; an entry paired with a later round's return would span a round
    # (0.1 s) and would do so for most collections. On a loaded host the kernel may hold one real
    # collection off the CPU for longer than a round (0.145 s seen at load 12), so one in twenty may.
    long = [c for c in gen2 if c["duration_s"] >= 0.1]
    assert len(long) <= max(1, len(gen2) // 20), long
    main_tid = r["target"]["pid"]  # the target has only its main thread
    assert {c["tid"] for c in closed} == {main_tid}, {c["tid"] for c in closed}
    assert "2" in r["gc_exact"]["by_generation"], r["gc_exact"]["by_generation"].keys()
    assert r["gc_exact"]["by_generation"]["2"]["count"] == len(gen2) + sum(
        1 for c in r["gc_exact"]["collections"] if c["open"] and c["generation"] == 2
    )


# Guards: automatic collections missing, or their generation made up. On 3.13 the collector picks
# the generation itself (gc_collect_main gets -1): generation null, as documented.
def test_gc_automatic_collections(pyenv_interp, gc_report):
    r = gc_report
    auto = [c for c in r["gc_exact"]["collections"] if not c["open"] and c["generation"] != 2]
    gens = sorted({str(c["generation"]) for c in auto})
    note(pyenv_interp, "gc: automatic collections", len(auto))
    for g in (0, 1, None):
        note(pyenv_interp, f"gc: automatic collections, generation {g}", sum(1 for c in auto if c["generation"] == g))
    # ~0.1 s of churn per round makes hundreds of young collections per second.
    assert len(auto) >= 10 * GC_DURATION_S, len(auto)
    if pyenv_interp.version[:2] < (3, 13):
        # A collection already running when the probes went in has no entry event: generation null,
        # counted from the start of tracing (documented). Only the first one can be such.
        first = min(r["gc_exact"]["collections"], key=lambda c: c["start_s"])
        auto = [c for c in auto if not (c is first and c["generation"] is None)]
    allowed = {0, 1, None} if pyenv_interp.version[:2] >= (3, 13) else {0, 1}
    assert {c["generation"] for c in auto} <= allowed, gens
    if pyenv_interp.version[:2] < (3, 13):
        assert any(c["generation"] == 0 for c in auto), gens
    # By generation: "unknown" is the key for null.
    keys = set(r["gc_exact"]["by_generation"])
    assert keys <= {"0", "1", "2", "unknown"}, keys
    # (each figure is rounded to the microsecond in the JSON)
    durations = [c["duration_s"] for c in r["gc_exact"]["collections"]]
    assert r["gc_exact"]["gc_s"] == pytest.approx(sum(durations), abs=1e-6 * (len(durations) + 1))


# -- test 5: SIGKILL mid-record leaves nothing behind -----------------------------------------


def take_gil_address(pid: int) -> int:
    return function_address(pid, "take_gil")


def function_address(pid: int, function: str) -> int:
    """Address of ``function`` (take_gil, drop_gil...) in ``pid``: the mapped file defining it, its symbol
    value and its mapping."""
    maps = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            maps.append((lo, hi, parts[1], int(parts[2], 16), parts[5]))
    files = []
    for *_rest, path in maps:
        name = os.path.basename(path)
        if (name.startswith("libpython") or name.startswith("python")) and path not in files:
            files.append(path)
    for path in files:
        nm = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True).stdout
        m = re.search(rf"^([0-9a-f]+) [tT] {function}$", nm, re.M)
        if not m:
            continue
        value = int(m.group(1), 16)
        # Symbol value (a virtual address) -> file offset, through the LOAD segment holding it.
        segs = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
        offset = None
        for s in re.finditer(r"^\s*LOAD\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+0x[0-9a-f]+\s+0x([0-9a-f]+)", segs, re.M):
            off, vaddr, memsz = (int(x, 16) for x in s.groups())
            if vaddr <= value < vaddr + memsz:
                offset = value - vaddr + off
        assert offset is not None, f"{function} at {value:#x} is in no LOAD segment of {path}"
        for lo, hi, perms, moff, mpath in maps:
            if mpath == path and "x" in perms and moff <= offset < moff + (hi - lo):
                return lo + offset - moff
        raise AssertionError(f"{path}: {function} (file offset {offset:#x}) is not mapped executable in {pid}")
    raise AssertionError(f"no mapped interpreter file of {pid} defines {function}: {files}")


def first_byte(pid: int, addr: int) -> int:
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(addr)
        return f.read(1)[0]


def cpu_rates(proc, n: int) -> list:
    """The next ``n`` "iterations per CPU second" figures exact_counter.py prints (one per 0.25 s)."""
    rates = []
    while len(rates) < n:
        line = proc.read_line(5).decode()
        assert line.startswith("rate "), f"exact_counter.py printed {line!r}"
        rates.append(float(line.split()[2]))
    return rates


def drain_lines(proc) -> None:
    while proc.read_line(0.02):
        pass


def relative_rate(proc, control, n: int) -> float:
    """Median over ``n`` 0.25 s windows of the target's rate over the control's, read side by side.

    Both count on the same CPU. The rate per CPU second of one counter alone jumped between ~0.7M and
    ~1.2M/s within seconds on the 2-CPU VM (pinned or not: the host's doing), but two counters sharing
    a CPU moved together, their ratio within +-3.5%.
    """
    drain_lines(proc)
    drain_lines(control)
    ratios = []
    for _ in range(n):
        ratios.append(cpu_rates(proc, 1)[0] / cpu_rates(control, 1)[0])
    return statistics.median(ratios)


INT3 = 0xCC


def wait_for_line(stream, prefix: bytes, deadline: float) -> None:
    """Reads ``stream`` (a pipe) until a line starting with ``prefix``; fails at ``deadline`` or its end."""
    buf = b""
    fd = stream.fileno()
    while not any(line.startswith(prefix) for line in buf.split(b"\n")):
        left = deadline - time.monotonic()
        assert left > 0, f"no line {prefix!r} in time; got {buf!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"stream ended without a line {prefix!r}; got {buf!r}"
            buf += chunk


# Guards: probes (int3 at take_gil) left in a target when gilty is killed and cannot clean up, which
# would slow every GIL handoff of the target for the rest of its life.
def test_sigkill_mid_record_leaves_no_probes(pyenv_interp, targets):
    # The kernel removes a killed tracer's probes whatever the interpreter: one version shows it
    # (the probe addresses of each version are checked by the exact-mode tests above).
    if pyenv_interp.minor_str != "3.12":
        pytest.skip("kernel behaviour, checked on pyenv 3.12 only (suite time)")
    proc = targets(pyenv_interp, "exact_counter.py", "pin")
    control = targets(pyenv_interp, "exact_counter.py", "pin")  # never traced: the yardstick
    addr = take_gil_address(proc.pid)
    original = first_byte(proc.pid, addr)
    assert original != INT3, f"take_gil at {addr:#x} already starts with int3 before gilty ran"
    before = relative_rate(proc, control, 12)
    gilty = subprocess.Popen(
        gilty_command() + ["record", "--exact", "--pid", str(proc.pid), "--duration", "60", "--format", "json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=gilty_env(),
    )
    try:
        started = time.monotonic()
        deadline = started + 10
        while first_byte(proc.pid, addr) != INT3:  # the probes are in: this reads the right address
            assert gilty.poll() is None, f"gilty exited {gilty.returncode}: {gilty.stderr.read().decode()}"
            assert time.monotonic() < deadline, "take_gil never got its int3: gilty did not attach"
            time.sleep(0.01)
        # The int3 goes in with the first thread's events; they record (and cost the target most) once
        # all are enabled, when gilty says it is recording. Opening them can wait for the kernel to
        # finish removing an earlier tracer's probes (the keeper of the previous record, say).
        wait_for_line(gilty.stderr, b"gilty: recording", deadline)
        attached = relative_rate(proc, control, 3)
        time.sleep(max(0.0, started + 1.5 - time.monotonic()))
        assert gilty.poll() is None, f"gilty exited {gilty.returncode} before the kill: {gilty.stderr.read().decode()}"
        killed = time.monotonic()
        gilty.send_signal(signal.SIGKILL)
        gilty.wait(10)  # the kernel closes its perf fds, removing the probes, as it exits
    finally:
        if gilty.poll() is None:
            gilty.kill()
            gilty.wait(10)
        gilty.stderr.close()
    while first_byte(proc.pid, addr) == INT3:
        assert time.monotonic() < killed + 10, "take_gil still starts with int3 10 s after gilty was killed"
        time.sleep(0.01)
    gone_after = time.monotonic() - killed
    assert first_byte(proc.pid, addr) == original
    # Every probe goes, not only take_gil's: the counter's cost per iteration is back to what it was.
    time.sleep(0.3)
    after = relative_rate(proc, control, 12)
    note(pyenv_interp, "sigkill: SIGKILL to int3 gone, s", round(gone_after, 3))
    note(pyenv_interp, "sigkill: rel. rate attached/before", round(attached / before, 3))
    note(pyenv_interp, "sigkill: rel. rate after/before", round(after / before, 3))
    assert proc.alive(), proc.stderr_text()
    # The test can tell: probes in place cut the rate to ~0.1-0.3 of it.
    assert attached < 0.8 * before, (attached, before)
    assert abs(after - before) <= 0.1 * before, (
        f"iterations per CPU second relative to an untraced twin: {before:.3f} before, {after:.3f} after the kill"
    )


# -- test 6: refusal on a stripped interpreter ------------------------------------------------


# Guards: a stripped interpreter (Debian's python3.11, no debug symbols installed) crashing exact
# mode, hanging, or harming the target, instead of one clear line and exit 9; and sampling still works.
def test_refusal_on_stripped_debian_python():
    if not DEBIAN_PYTHON.exists():
        pytest.skip(f"Debian python3.11 not installed ({DEBIAN_PYTHON})")
    reason = exact_skip_reason()
    if reason:
        pytest.skip(reason)
    with running_target(str(DEBIAN_PYTHON), "sleeper.py") as proc:
        before = settled_state(proc.pid)
        rc, out, err = run_gilty("record", "--exact", "--pid", proc.pid, "--duration", 2, "--format", "json")
        if rc == 0:
            pytest.skip("Debian's python3.11 has debug symbols installed here: exact mode does not refuse it")
        assert rc == EXIT_EXACT_UNAVAILABLE, (rc, err)
        assert out == "", out
        assert "Traceback" not in err, err
        lines = err.splitlines()
        assert len(lines) == 1, err
        assert "needs the symbol take_gil" in lines[0] and "use sampling" in lines[0], lines[0]
        after = settled_state(proc.pid)
        assert after == before, (before, after)
        rc, out, err = run_gilty("record", "--pid", proc.pid, "--duration", 1, "--rate", 200, "--format", "json")
        assert rc == 0, err
        report = parse_json(out)
        assert report["exact_overhead"] is None and report["gc_exact"] is None
        assert thread_named(report, "sleeper")["states"]["idle"] >= 0.9
        assert settled_state(proc.pid) == before


# Guards: `top --exact` not showing exact figures per window (the live view's exact mode).
def test_top_exact_shows_exact_shares_each_second(pyenv_interp):
    # top's per-second exact lines are gilty's own; the exact figures themselves are checked on every
    # version by test_sampled_matches_exact.
    one_version(pyenv_interp, "top's exact lines do not depend on the target's version")
    with running_target(pyenv_interp, "exact_cpu_and_io_threads.py", "0.005") as proc:
        time.sleep(0.3)
        code, out, err = run_gilty("top", "--pid", proc.pid, "--duration", "2.5", "--rate", "200", "--exact", timeout=60)
    assert code == 0, err
    frames = [block for block in out.split("gilty top:") if block.strip()]
    assert len(frames) >= 2, out
    for frame in frames[:2]:
        assert re.search(r"exact \(uprobes\): \d+ events in the last", frame), frame
        io1 = next(line for line in frame.splitlines() if line.startswith("io1"))
        wait = int(re.search(r"exact hold \S+ wait (\d+)%", io1).group(1))
        assert 15 <= wait <= 60, io1  # I/O threads wait ~one switch interval per 10 ms sleep


def _hog_beside(pid: int, cpu: int) -> subprocess.Popen:
    """A pure-Python busy loop pinned to ``cpu``, where every thread of ``pid`` is pinned too: the
    GIL's holder is preempted about half the time."""
    for tid in task_ids(pid):
        os.sched_setaffinity(tid, {cpu})
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass\n"
    return subprocess.Popen([str(DEBIAN_PYTHON) if DEBIAN_PYTHON.exists() else "python3", "-c", code], stdin=subprocess.DEVNULL)


# Guards issue 31 item 5: with its holders preempted by the kernel, the text printed `HOLD 12%
# (sampled 3%)` though the sampled hold plus cpu_wait_holding_gil matched exact; and the wait
# histogram printed a `[0ns, 1ns)` row (waits with no other holder) with its columns out of line.
def test_text_compares_exact_hold_with_the_sampled_hold_of_a_preempted_holder(pyenv_interp):
    one_version(pyenv_interp, "the text's columns do not depend on the target's version")
    with running_target(pyenv_interp, "spinners.py") as proc:
        hog = _hog_beside(proc.pid, 0)
        try:
            time.sleep(0.3)
            code, out, err = run_gilty("record", "--exact", "--pid", proc.pid, "--duration", "2", "--rate", "500", timeout=90)
        finally:
            hog.kill()
            hog.wait()
    assert code == 0, err
    lines = out.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("THREAD") and "(sampled)" in line)
    for name in ("spinner-1", "spinner-2"):
        row = next(line for line in lines[heading:] if line.startswith(name)).split()
        exact, sampled = float(row[2].rstrip("%")), float(row[3].strip("()%"))
        note(pyenv_interp, f"preempted {name}: exact hold - sampled (points)", exact - sampled)
        assert abs(exact - sampled) <= 100 * STARVED_TOLERANCE, out
    histogram = [line for line in lines if line.startswith("    [")]
    assert histogram, out
    assert not any(line.startswith("    [0") for line in histogram), out
    assert len({line.index("|") for line in histogram}) == 1, "\n".join(histogram)
