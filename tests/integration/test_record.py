"""`gilty record --rate 500 --format json` against targets whose thread states are known.

Each target is started, recorded once and killed per interpreter (module-scoped fixtures), so only
one target burns CPU at a time. Targets in a steady state (one sleep, one lock wait, one hash loop,
GC churn, short sleeps) are recorded for 1 s; the two whose threads trade the GIL (spinners,
cpu_and_io_threads' convoy) for 3 s, where the GIL's unfairness and the count of wake-ups need it.
Thresholds come from runs on the 2-CPU dev box, idle and with other jobs running: the values
measured are in each test's comment, and the session summary prints the values of the current run
("gilty: measured values behind the thresholds").
"""

from __future__ import annotations

import json
import signal
import time

import pytest
from conftest import note, record_json, running_target, task_ids, thread_named
from timing_reference import Pressure, assert_unless_busy

pytestmark = [pytest.mark.interpreter, pytest.mark.alone]

RATE_HZ = 500
# Threads trading the GIL: under load one spinner got 0.19 of 3 s; cpu_and_io_threads needs >= 50 wake-ups
# per I/O thread (about 65 a second) and a mean wait over many of them.
DURATION_S = 3.0
# Steady targets: each state is held for the whole run, and the thresholds sit 10+ points below the
# measured shares, so 500 passes (200 at the floor allowed under load) are plenty: a share read off
# 200 passes has a binomial spread under 3.5 points, and the threads' periods (10 ms sleeps, a
# 64 MiB hash, GC cycles) repeat tens of times a second.
STEADY_S = 1.0
STATES = ("holding_gil", "gc", "waiting_gil", "native", "idle", "unknown", "cpu_wait")


def record_target(interp, script: str, duration: float = STEADY_S) -> dict:
    """Start ``script``, record it, kill it; the report gets the target's OS thread ids as ``_tids``."""
    with running_target(interp, script) as proc:
        pressure = Pressure()
        report = record_json(proc.pid, duration=duration, rate=RATE_HZ)
        report["_pressure"] = pressure.end()  # whether the machine could give the target its CPU shares
        report["_tids"] = task_ids(proc.pid)
        report["_pid"] = proc.pid
    return report


@pytest.fixture(scope="module")
def spinners(interp):
    return record_target(interp, "spinners.py", DURATION_S)


@pytest.fixture(scope="module")
def sleeper(interp):
    return record_target(interp, "sleeper.py")


@pytest.fixture(scope="module")
def lock_blocked(interp):
    return record_target(interp, "lock_blocked.py")


@pytest.fixture(scope="module")
def hasher(interp):
    return record_target(interp, "hasher.py")


@pytest.fixture(scope="module")
def gc_churn(interp):
    return record_target(interp, "gc_churn.py")


@pytest.fixture(scope="module")
def io_threads(interp):
    return record_target(interp, "io_threads.py")


def overshoot_snapshot(proc) -> dict:
    """cpu_and_io_threads.py's own count of wake-ups and summed sleep overshoot per I/O thread."""
    proc.popen.send_signal(signal.SIGUSR1)
    line = proc.read_line(5)
    assert line, "cpu_and_io_threads.py did not answer SIGUSR1"
    return json.loads(line)


@pytest.fixture(scope="module")
def cpu_and_io(interp):
    """The report, plus ``_self``: {io thread: (wake-ups, mean overshoot s)} measured by the target meanwhile."""
    with running_target(interp, "cpu_and_io_threads.py") as proc:
        time.sleep(0.2)  # let the convoy settle
        before = overshoot_snapshot(proc)
        pressure = Pressure()
        report = record_json(proc.pid, duration=DURATION_S, rate=RATE_HZ)
        report["_pressure"] = pressure.end()
        after = overshoot_snapshot(proc)
        report["_tids"] = task_ids(proc.pid)
    report["_self"] = {}
    for name in ("io1", "io2"):
        wakes = after[name][0] - before[name][0]
        total = after[name][1] - before[name][1]
        report["_self"][name] = (wakes, total / wakes if wakes else None)
    return report


def states(report: dict, name: str) -> dict:
    return thread_named(report, name)["states"]


def top_function(thread: dict, state: str) -> dict:
    entries = [f for f in thread["top_functions"] if f["state"] == state]
    assert entries, f"no top_functions in state {state} for {thread['name']}: {thread['top_functions']}"
    return max(entries, key=lambda f: f["fraction"])


# Guards: a report that does not match what was asked (rate/duration ignored, samples lost, the
# wrong process), state fractions that do not add up, or tids that are not the target's threads.
def test_report_header_and_consistency(interp, sleeper):
    r = sleeper
    assert r["target"]["pid"] == r["_pid"]
    assert r["rate_hz"] == RATE_HZ and r["partial"] is False and r["stopped_by"] == "duration"
    assert r["duration_s"] == pytest.approx(STEADY_S, abs=0.5), r["duration_s"]
    # 500 passes asked for; over 3 s: 1490-1500 of 1500 on an idle box, 672 at load average 10. Below
    # 40% (200) the sampler fell far behind, or --rate was ignored (the default 100 Hz gives 100).
    note(interp, "sleeper: samples (500 asked)", r["samples"])
    assert 0.4 * RATE_HZ * STEADY_S <= r["samples"] <= 1.05 * RATE_HZ * STEADY_S, r["samples"]
    assert r["errors"]["torn_dropped"] <= 0.01 * r["samples"], r["errors"]
    assert {t["tid"] for t in r["threads"]} == r["_tids"]
    for t in r["threads"]:
        assert set(t["states"]) == set(STATES), t["states"]
        assert sum(t["states"].values()) == pytest.approx(1.0, abs=1e-4), t
        assert t["samples"] <= r["samples"]
        assert sum(t["idle_syscalls"].values()) == pytest.approx(t["states"]["idle"], abs=1e-4), t


# Guards: CPU-bound Python threads classified native/unknown instead of holding/waiting for the GIL
# (e.g. a woken GIL waiter taken for native code). Measured hold+wait per spinner: 0.93-0.99 on an
# idle box, 0.83-0.91 with another CPU hog running (3.13 worst); hold 0.47-0.52 each.
def test_spinners_hold_or_wait_for_the_gil(interp, spinners):
    for name in ("spinner-1", "spinner-2"):
        s = states(spinners, name)
        note(interp, "spinner: holding+waiting", s["holding_gil"] + s["waiting_gil"])
        note(interp, "spinner: holding", s["holding_gil"])
        note(interp, "spinner: native", s["native"])
        # A spinner that is runnable without a CPU (a busy machine) reads cpu_wait (docs/states.md).
        assert s["holding_gil"] + s["waiting_gil"] + s["cpu_wait"] >= 0.75, (name, s)
        # Each gets a share (0.47-0.52 on an idle box; 0.19/0.81 seen under heavy load: the GIL is not fair).
        # A holder preempted by the kernel still holds (cpu_wait_holding_gil); at load ~20 a spinner
        # held 0.08-0.10 all the same: the machine could not give it more (issue 31).
        hold = s["holding_gil"] + (thread_named(spinners, name).get("cpu_wait_holding_gil") or 0.0)
        assert_unless_busy(
            hold >= 0.1 and s["waiting_gil"] >= 0.1,
            spinners["_pressure"],
            f"{name}: held {hold:.3f}, waited {s['waiting_gil']:.3f}: {s}",
        )
        assert s["idle"] <= 0.02 and s["unknown"] <= 0.02, (name, s)
    # One of the two always has the GIL (measured 0.98-0.99).
    note(interp, "spinners: gil_utilisation", spinners["gil_utilisation"])
    # The GIL is free only in a handoff, and a handoff lasts while its taker waits for a CPU: on a
    # loaded host (0.884 at load 9) the bar is lowered by the spinners' passes spent runnable without
    # the GIL or a CPU, measured in the same run.
    unheld_cpu_wait = sum(
        states(spinners, n)["cpu_wait"] - (thread_named(spinners, n).get("cpu_wait_holding_gil") or 0.0)
        for n in ("spinner-1", "spinner-2")
    )
    note(interp, "spinners: cpu_wait without the GIL", round(unheld_cpu_wait, 3))
    assert spinners["gil_utilisation"] >= 0.9 - unheld_cpu_wait, (spinners["gil_utilisation"], unheld_cpu_wait)
    # A holder preempted by other jobs reads cpu_wait (it still counts in gil_utilisation above).
    both = sum(states(spinners, name)["holding_gil"] + states(spinners, name)["cpu_wait"] for name in ("spinner-1", "spinner-2"))
    assert both >= 0.85, both
    assert "contention" in spinners["verdict_kinds"], spinners["verdict_kinds"]


# Guards: the GIL holder's stack attributed to the wrong function or file.
def test_spinners_top_function_is_spin_forever(interp, spinners):
    for name in ("spinner-1", "spinner-2"):
        top = top_function(thread_named(spinners, name), "holding_gil")
        assert top["function"] == "spin_forever" and top["file"].endswith("spinners.py"), top
        assert_unless_busy(
            top["fraction"] >= 0.1, spinners["_pressure"], f"{name} held the GIL in spin_forever {top['fraction']:.3f}"
        )
    # While one spinner waits, the other holds the GIL: blame names the other spinner.
    blame = thread_named(spinners, "spinner-1")["blame"]
    note(interp, "spinner-1: blame[0] fraction", blame[0]["fraction"] if blame else 0.0)
    assert blame and blame[0]["holder_name"] == "spinner-2" and blame[0]["fraction"] >= 0.6, blame


# Guards: a sleeping thread taken for a GIL waiter or running thread, or its syscall misread.
# Measured: idle 1.000, all in clock_nanosleep (3.11+) / pselect6 (3.10).
def test_sleeper_is_idle_in_sleep(interp, sleeper):
    t = thread_named(sleeper, "sleeper")
    note(interp, "sleeper: idle", t["states"]["idle"])
    assert t["states"]["idle"] >= 0.9, t["states"]
    sleep_calls = {"select", "pselect6"} if interp.version[:2] == (3, 10) else {"clock_nanosleep", "nanosleep"}
    main_call, share = max(t["idle_syscalls"].items(), key=lambda kv: kv[1])
    assert main_call in sleep_calls and share >= 0.9, t["idle_syscalls"]
    assert thread_named(sleeper, "MainThread")["states"]["idle"] >= 0.9


# Guards: a thread blocked on a threading.Lock (a futex outside the GIL) counted as waiting for the
# GIL. Measured: idle 1.000 in futex, waiting_gil 0.
def test_lock_waiter_is_idle_not_waiting_for_the_gil(interp, lock_blocked):
    t = thread_named(lock_blocked, "lock-waiter")
    note(interp, "lock-waiter: idle", t["states"]["idle"])
    note(interp, "lock-waiter: waiting_gil", t["states"]["waiting_gil"])
    assert t["states"]["idle"] >= 0.9, t["states"]
    assert t["states"]["waiting_gil"] <= 0.02, t["states"]
    assert t["idle_syscalls"].get("futex", 0) >= 0.9, t["idle_syscalls"]
    assert t["idle_kinds"].get("lock wait", 0) >= 0.9, t["idle_kinds"]
    top = top_function(t, "idle")
    assert top["function"] == "block_forever" and top["file"].endswith("lock_blocked.py"), top


# Guards: C code running with the GIL released (hashlib on big buffers) not seen as native.
# Measured native 0.998-1.000.
def test_hasher_runs_native(interp, hasher):
    s = states(hasher, "hasher")
    note(interp, "hasher: native", s["native"])
    assert s["native"] + s["cpu_wait"] >= 0.8, s  # runnable without a CPU on a busy machine: cpu_wait
    assert s["idle"] <= 0.05, s
    top = top_function(thread_named(hasher, "hasher"), "native")
    assert top["function"] == "hash_forever", top


# Guards: GC passes not detected (gc state never reported) or blamed on the wrong thread.
# Measured gc 0.53-0.61 of the churner's samples.
def test_gc_churner_is_seen_collecting(interp, gc_churn):
    s = states(gc_churn, "gc-churner")
    note(interp, "gc-churner: gc", s["gc"])
    assert s["gc"] > 0.05, s
    assert s["gc"] + s["holding_gil"] + s["cpu_wait"] >= 0.85, s
    assert gc_churn["gc_share"] > 0.05, gc_churn["gc_share"]
    assert states(gc_churn, "MainThread")["gc"] == 0, "only the GIL holder can be collecting"


# Guards: false GIL contention on a process that only does short blocking calls (io_threads.py).
# Measured io threads: idle 0.983-0.996, waiting_gil 0 on an idle box; at load average 10 idle fell
# to 0.79 with the rest native (woken, runnable, not yet on a CPU), waiting_gil still 0.
def test_io_threads_alone_are_idle(interp, io_threads):
    for name in ("io1", "io2"):
        t = thread_named(io_threads, name)
        note(interp, "io alone: idle", t["states"]["idle"])
        note(interp, "io alone: waiting_gil", t["states"]["waiting_gil"])
        # On a loaded host a woken thread waits for a CPU: 0.245 idle at load 10. The kernel's run delay
        # for the thread over the same recording (`run_delay_share`) is that time, so the bar comes down by it.
        delay = t.get("run_delay_share") or 0.0
        note(interp, "io alone: kernel run delay", round(delay, 3))
        assert t["states"]["idle"] >= 0.75 - delay, (name, t["states"], delay)
        # The rest of a woken thread's time, on a busy host, is runnable without a CPU.
        assert t["states"]["idle"] + t["states"]["native"] + t["states"]["cpu_wait"] >= 0.95, (name, t["states"])
        assert t["states"]["waiting_gil"] <= 0.05, (name, t["states"])
        assert t["convoy"]["is_convoy"] is False, (name, t["convoy"])
    assert "contention" not in io_threads["verdict_kinds"] and "convoy" not in io_threads["verdict_kinds"], io_threads["verdict"]
    assert io_threads["mean_waiting_threads"] <= 0.1, io_threads["mean_waiting_threads"]


def sampler_starved(report: dict) -> str:
    """Why the box was too busy for timing comparisons (empty if it was not).

    On an idle box a 3 s record at 500 Hz gets 1440-1500 passes with 26-85 late; while other jobs
    (benchmarks with 4 spinning threads) ran, 1277-1392 passes with 167-2145 late and gaps of up to
    160 ms between passes.
    """
    expected = RATE_HZ * DURATION_S
    late = report["errors"]["late"]
    if report["samples"] < 0.9 * expected or late > 0.1 * report["samples"]:
        return f"sampler starved by other load: {report['samples']}/{expected:.0f} passes, {late} late"
    return ""


# Guards: the convoy of cpu_and_io_threads.py going unseen: I/O threads waking from sleep(0.01)
# queue for the GIL held by a CPU-bound thread. Measured waiting_gil 0.33-0.44 (0.47-0.62 under
# load), episodes 0.85-0.92 of the thread's own wake-ups on an idle box, down to 0.48 under load (a
# woken thread still waiting for a CPU is native, so idle -> native -> waiting starts no episode).
def test_io_threads_beside_a_cpu_thread_wait_in_a_convoy(interp, cpu_and_io):
    for name in ("io1", "io2"):
        t = thread_named(cpu_and_io, name)
        convoy = t["convoy"]
        wakes, own_mean = cpu_and_io["_self"][name]
        note(interp, "io beside cpu: waiting_gil", t["states"]["waiting_gil"])
        note(interp, "io beside cpu: convoy episodes/wake-ups", convoy["episodes"] / wakes if wakes else None)
        # A woken I/O thread without a CPU is cpu_wait, not waiting_gil (0.155 + cpu_wait at load 9).
        assert t["states"]["waiting_gil"] + t["states"]["cpu_wait"] >= 0.2, (name, t["states"])
        assert convoy["is_convoy"] is True, (name, convoy)
        assert wakes >= 50, (name, wakes)
        # 32 of 172 wake-ups seen as episodes at load ~20 (issue 31): a woken thread waiting for a CPU
        # starts no episode.
        assert_unless_busy(
            convoy["episodes"] >= 0.3 * wakes,
            cpu_and_io["_pressure"],
            f"{name}: {convoy['episodes']} of {wakes} wake-ups seen as convoy episodes",
        )
        assert convoy["mean_wait_s"] is not None and convoy["mean_wait_s"] >= 0.001, (name, convoy)
    assert "convoy" in cpu_and_io["verdict_kinds"], cpu_and_io["verdict"]
    # cpu1 holds the GIL 0.96-0.99 on an idle box; 0.79 seen when other jobs kept woken I/O threads
    # holding the GIL while off-CPU.
    # A holder the kernel preempts still holds the GIL (cpu_wait_holding_gil).
    cpu1 = thread_named(cpu_and_io, "cpu1")
    assert cpu1["states"]["holding_gil"] + (cpu1.get("cpu_wait_holding_gil") or 0.0) >= 0.6, cpu1["states"]


# Guards: a mis-measured convoy wait (wrong timestamps, episodes merged across sleeps, units): the
# target times its own sleep(0.01) and gilty's mean wait per wake-up must agree with the overshoot.
# Measured on an idle box: gilty 5.2-6.5 ms vs the threads' own 5.1-5.5 ms. Under load gilty falls
# below (10.1 vs 18.3 ms: woken threads waiting for a CPU count as native, not waiting_gil) or, when
# its own passes come late, above (37 vs 28 ms) -- so the comparison is skipped when the sampler was
# starved.
def test_convoy_wait_matches_the_io_threads_own_timing(interp, cpu_and_io):
    for name in ("io1", "io2"):
        convoy = thread_named(cpu_and_io, name)["convoy"]
        _, own_mean = cpu_and_io["_self"][name]
        note(interp, "io beside cpu: convoy mean_wait_s", convoy["mean_wait_s"])
        note(interp, "io beside cpu: own mean overshoot s", own_mean)
    starved = sampler_starved(cpu_and_io)
    if starved:
        pytest.skip(starved)
    for name in ("io1", "io2"):
        convoy = thread_named(cpu_and_io, name)["convoy"]
        _, own_mean = cpu_and_io["_self"][name]
        mean = convoy["mean_wait_s"]
        assert 0.001 <= mean <= 0.020, (name, convoy)
        # 0.4x still tells a per-pass count (one 2 ms period per "episode") from a real ~5 ms wait.
        assert 0.4 * own_mean - 0.001 <= mean <= 1.3 * own_mean + 0.001, (
            f"{name}: gilty says {mean * 1e3:.2f} ms per wake-up, the thread measured {own_mean * 1e3:.2f} ms"
        )


# Guards: waiting time blamed on the wrong holder (or on the waiter itself).
def test_convoy_blame_points_at_the_cpu_thread(interp, cpu_and_io):
    cpu1 = thread_named(cpu_and_io, "cpu1")
    for name in ("io1", "io2"):
        blame = thread_named(cpu_and_io, name)["blame"]
        assert blame, f"{name} has no blame entries"
        top = blame[0]
        note(interp, "io beside cpu: blame[0] fraction (cpu1)", top["fraction"])
        assert top["holder_name"] == "cpu1" and top["holder_tid"] == cpu1["tid"], blame
        assert top["fraction"] >= 0.6, blame
        assert top["holder_function"] == "cpu_spin", top
        assert sum(b["fraction"] for b in blame) <= 1.0 + 1e-4, blame
