"""The in-process monitor (gilty.observe.monitor / gilty.gil_stats) inside real interpreters of each version,
installed from the wheel: two spinners must each hold the GIL about half the time and wait the other
half, the sleeping main thread must be idle, a thread that exited seconds ago must still be listed, and
the monitor's own thread must not appear."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import TARGETS, note
from timing_reference import Pressure, assert_unless_busy
from wheel_env import venv_with_wheel

pytestmark = [pytest.mark.interpreter, pytest.mark.alone]


@pytest.fixture(scope="module")
def stats(interp) -> dict:
    python = venv_with_wheel(interp) / "bin" / "python"
    pressure = Pressure()
    done = subprocess.run(
        [str(python), str(TARGETS / "monitor_spinners.py"), "0.001", "2.0", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ready"
    return {**json.loads(lines[1]), "_pressure": pressure}


def _thread(stats: dict, name: str) -> dict:
    found = [t for t in stats["threads"] if t["name"] == name]
    assert found, f"no thread {name!r} in {[t['name'] for t in stats['threads']]}"
    return found[0]


def test_spinners_share_the_gil(interp, stats):
    holds = {}
    for name in ("spinner-0", "spinner-1"):
        total = _thread(stats, name)["windows"]["total"]
        hold = holds[name] = total["holding_gil"] + total["gc"]
        note(interp, f"monitor {name} hold", round(hold, 3))
        note(interp, f"monitor {name} wait", round(total["waiting_gil"], 3))
        # Their time is the GIL's, held or waited for, or runnable without a CPU. (Each share alone is no
        # bar: 0.294 held with 0.587 waited, even turns, on a clean-clone run beside one CPU hog.)
        assert_unless_busy(hold + total["waiting_gil"] + total["cpu_wait"] >= 0.8, stats["_pressure"], f"{name}: {total}")
        # seconds are the time the passes stood for: about the 2 s the thread ran
        assert 1.0 <= sum(_thread(stats, name)["seconds"].values()) <= 3.5
    # Even turns: each holds about half of what the two hold. (Not hold against wait of one thread: on a
    # busy host a holder preempted by the kernel is runnable without a CPU, cpu_wait, while a waiter
    # asleep on the GIL is not, so that ratio read 0.27 at load 12.) Beside eight CPU hogs most of the
    # holding is cpu_wait (holds 0.04-0.12 each, summing to 0.11-0.15): too little left to compare.
    total = sum(holds.values())
    assert_unless_busy(total >= 0.2, stats["_pressure"], f"the spinners held the GIL {total:.3f} in all: {holds}")
    assert_unless_busy(0.3 <= holds["spinner-0"] / total <= 0.7, stats["_pressure"], f"uneven turns: {holds}")


def test_main_thread_idle_and_monitor_thread_absent(stats):
    main = _thread(stats, "MainThread")["windows"]["total"]
    assert main["idle"] >= 0.8, main
    assert not any(t["name"] == "gilty-monitor" for t in stats["threads"])
    assert stats["running"] and stats["failure"] is None
    # 1 kHz for about 2 s: passes are counted, and the monitor says what it cost
    assert stats["passes"] >= 500
    assert 0 < stats["monitor_cpu_s"] < stats["elapsed_s"]


def test_gc_pauses_are_exact(stats):
    gc_stats = stats["gc"]
    assert gc_stats["by_generation"]["2"]["count"] >= 5
    assert gc_stats["pause_s"] > 0
    buckets = gc_stats["by_generation"]["2"]["buckets"]
    assert sum(buckets.values()) == gc_stats["by_generation"]["2"]["count"]


def test_windows_cover_their_seconds(stats):
    spinner = _thread(stats, "spinner-0")["windows"]
    # The stats are read ~after the spinners ended: the 1 s window holds at most ~1 s of passes.
    assert spinner["1s"]["samples"] <= spinner["10s"]["samples"] <= spinner["total"]["samples"]
    assert spinner["60s"]["samples"] == spinner["total"]["samples"]


# Guards: a thread forgotten as soon as it exits, so the last minute's windows lose its time.
def test_a_thread_that_exited_seconds_ago_is_still_listed(stats):
    short = _thread(stats, "short-lived")
    assert short["windows"]["total"]["samples"] >= 1, short
