"""`gilty memory`'s analysis and reports on synthetic batches shaped like `MemoryMonitor.collect()`:
copy-on-write totals, GC facts, warnings, summary, the text report, and the JSON keys against
docs/memory.md (both ways)."""

from __future__ import annotations

import json
import pathlib
import re

from gilty.memory import analysis
from gilty.memory.session import MemorySession
from gilty.report.memory import json as memory_json
from gilty.report.memory import text as memory_text

MIB = 1 << 20
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "memory.md"
MASTER, W1, W2 = 100, 101, 102


def gc_state(enabled=True, thresholds=(700, 10, 10), collections=(10, 1, 0), frozen_empty=False, long_lived=500_000):
    return {
        "enabled": enabled,
        "collecting": False,
        "thresholds": list(thresholds),
        "counts": [5, 0, 0],
        "collections": list(collections),
        "frozen_empty": frozen_empty,
        "long_lived_total": long_lived,
        "long_lived_pending": 0,
    }


def snapshot(pid, t, frozen=375, reason="initial", **state):
    s = gc_state(**state)
    s.update(pid=pid, t=t, reason=reason, frozen_objects=frozen, frozen_exact=True, frozen_walk_s=0.01)
    return s


def sample(pid, n, t, uss, rss=170 * MIB, pss=None, gc=None):
    return {
        "pid": pid,
        "pass": n,
        "t": t,
        "rss": rss,
        "pss": pss if pss is not None else rss // 2,
        "uss": uss,
        "shared_clean": 4 * MIB,
        "shared_dirty": rss - uss - 4 * MIB,
        "private_clean": 0,
        "private_dirty": uss,
        "anonymous": rss - 4 * MIB,
        "swap": 0,
        "minflt": 1000 + n,
        "majflt": 0,
        "gc": gc,
        "cost": {"stat_s": 2e-5, "smaps_s": 0.005, "gc_s": 3e-6, "pagemap_s": 0.004, "pages_read": 40000},
    }


def step(pid, t, reason="pass", gc=0, outside=0, ambiguous=0):
    return {
        "pid": pid,
        "t": t,
        "reason": reason,
        "gc_bytes": gc,
        "outside_bytes": outside,
        "ambiguous_bytes": ambiguous,
        "released_bytes": 0,
        "sole_bytes": 0,
        "minflt": 0,
        "scan_s": 0.002,
        "pages_read": 40000,
    }


def proc(pid, role, first_seen=0.0, exited=None):
    return {
        "pid": pid,
        "ppid": 1 if role == "master" else MASTER,
        "role": role,
        "cmdline": "gunicorn: master" if role == "master" else "gunicorn: worker",
        "first_seen": first_seen,
        "exited": exited,
        "python": "3.12.1",
        "gc_note": None,
        "baseline": {
            "t": first_seen,
            "present_bytes": 165 * MIB,
            "shared_bytes": 160 * MIB,
            "mappings": 40,
            "scan_s": 0.004,
            "method": "pagemap_exclusive_bit_and_pfn",
        },
    }


def fork_fact(pid, t, shared=0, copied=0, new=0, modules=("sys", "os", "app"), parent=MASTER):
    share = None
    if pid != MASTER:
        share = {
            "present_bytes": shared + copied + new,
            "shared_with_parent_bytes": shared,
            "copied_bytes": copied,
            "new_bytes": new,
            "shared_other_bytes": 0,
            "method": "pagemap_pfn",
            "scan_s": 0.003,
        }
    return {"pid": pid, "t": t, "when": "final", "parent": parent, "share": share, "modules": list(modules)}


def default_session(frozen=375, master_enabled=True, extra_batch=None) -> MemorySession:
    """Master + 2 workers without the freeze fix: W1 runs a full collection (50 MiB copied during
    it), W2 reads every object (30 MiB copied outside GC)."""
    s = MemorySession(MASTER, 1.0, 0.001, requested_duration_s=4.0, start_time="2026-11-22T00:00:00+00:00")
    first = {
        "processes": [proc(MASTER, "master"), proc(W1, "worker"), proc(W2, "worker")],
        "samples": [
            sample(MASTER, 0, 0.01, 5 * MIB, gc=gc_state(enabled=master_enabled)),
            sample(W1, 0, 0.02, 2 * MIB, gc=gc_state()),
            sample(W2, 0, 0.03, 2 * MIB, gc=gc_state()),
        ],
        "cow_steps": [step(W1, 0.02), step(W2, 0.03)],
        "gc_windows": [],
        "gc_snapshots": [
            snapshot(MASTER, 0.01, frozen, enabled=master_enabled),
            snapshot(W1, 0.02, frozen),
            snapshot(W2, 0.03, frozen),
        ],
        "notes": [],
        "master_exited": None,
        "finished": False,
    }
    later = {
        "processes": [],
        "samples": [],
        "cow_steps": [
            step(W1, 1.50, "gc_start", outside=1 * MIB // 4),
            step(W1, 1.70, "gc_end", gc=50 * MIB, ambiguous=0),
            step(W2, 2.0, "pass", outside=30 * MIB),
        ],
        "gc_windows": [{"pid": W1, "start": 1.49, "end": 1.69, "generation": 2, "polls": 200}],
        "gc_snapshots": [],
        # Preloaded: the workers' pages are the master's, copied where they wrote.
        "fork_facts": [
            fork_fact(MASTER, 4.0),
            fork_fact(W1, 4.0, shared=110 * MIB, copied=52 * MIB, new=1 * MIB),
            fork_fact(W2, 4.0, shared=130 * MIB, copied=32 * MIB, new=1 * MIB),
        ],
        "notes": [],
        "master_exited": None,
        "finished": False,
    }
    for n in (1, 2, 3):
        t = float(n)
        later["samples"] += [
            sample(MASTER, n, t + 0.01, 5 * MIB, gc=gc_state(enabled=master_enabled)),
            sample(W1, n, t + 0.02, (2 + (50 if n >= 2 else 0)) * MIB, gc=gc_state(collections=(10, 1, 1 if n >= 2 else 0))),
            sample(W2, n, t + 0.03, (2 + (30 if n >= 2 else 0)) * MIB, gc=gc_state()),
        ]
    s.add_batch(first)
    s.add_batch(later)
    if extra_batch:
        s.add_batch(extra_batch)
    s.finish(
        {
            "elapsed_s": 4.0,
            "passes": 4,
            "measuring_cpu_s": 0.1,
            "trigger_scans": 2,
            "trigger_scans_skipped": 0,
            "tree_scans": 160,
            "tree_scan_s": 0.02,
            "gc_poll": {"cpu_s": 0.12, "passes": 4000, "max_gap_s": 0.003, "late_passes": 3, "windows": 1},
        },
        4.0,
        "duration",
    )
    return s


def frozen_session() -> MemorySession:
    """The same tree with the freeze fix: the master froze 560k objects and has GC off."""
    s = MemorySession(MASTER, 1.0, 0.001)
    s.add_batch(
        {
            "processes": [proc(MASTER, "master"), proc(W1, "worker")],
            "samples": [
                sample(MASTER, 0, 0.0, 5 * MIB, gc=gc_state(enabled=False)),
                sample(W1, 0, 0.0, 2 * MIB, gc=gc_state()),
                sample(MASTER, 1, 1.0, 5 * MIB, gc=gc_state(enabled=False)),
                sample(W1, 1, 1.0, 3 * MIB, gc=gc_state()),
            ],
            "cow_steps": [step(W1, 1.0, outside=40 * MIB)],
            "gc_snapshots": [snapshot(MASTER, 0.0, 560_000, enabled=False), snapshot(W1, 0.0, 560_000)],
        }
    )
    s.finish({}, 1.0, "duration")
    return s


# -- analysis ----------------------------------------------------------------------------------------


def test_cow_totals_per_worker():
    s = default_session()
    c1 = analysis.cow_of(s.processes[W1])
    assert c1["during_gc_bytes"] == 50 * MIB
    assert c1["outside_gc_bytes"] == MIB // 4
    assert c1["private_growth_bytes"] == 50 * MIB
    assert c1["gc_triggered_scans"] == 2
    assert c1["still_shared_bytes"] == 160 * MIB - 50 * MIB - MIB // 4
    c2 = analysis.cow_of(s.processes[W2])
    assert (c2["during_gc_bytes"], c2["outside_gc_bytes"]) == (0, 30 * MIB)


def test_gc_facts_from_samples_and_windows():
    g = analysis.gc_of(default_session().processes[W1])
    assert g["enabled"] and g["thresholds"] == [700, 10, 10]
    assert g["collections_during_run"] == [0, 0, 1]
    assert g["windows_by_generation"]["2"] == 1 and g["missed_collections"] == [0, 0, 0]
    assert abs(g["longest_pause_s"] - 0.2) < 1e-9
    assert g["frozen"] == 375 and g["froze_little"] is True


def test_warnings_for_a_master_that_froze_next_to_nothing():
    codes = [w["code"] for w in analysis.warnings(default_session())]
    assert codes == ["master_gc_unfrozen", "worker_gc_unfrozen"]
    worker_warning = analysis.warnings(default_session())[1]
    # W2 ran no full collection: a warning about full collections copying the heap is not about it.
    assert worker_warning["pids"] == [W1]
    assert "50.0 MiB copied during collections" in worker_warning["message"]


def test_no_freeze_warnings_with_the_fix():
    assert analysis.warnings(frozen_session()) == []
    assert analysis.gc_of(frozen_session().processes[MASTER])["froze_little"] is False


def test_config_change_is_warned_but_not_the_child_hook():
    late_enable = {"gc_snapshots": [snapshot(W2, 3.2, 375, reason="changed", enabled=True)]}
    s = default_session(extra_batch=late_enable)
    # W2 was found with GC on; make its first snapshot "off" so the change is off -> on.
    s.processes[W2].gc_snapshots[0]["enabled"] = False
    changed = [w for w in analysis.warnings(s) if w["code"] == "gc_config_changed"]
    assert len(changed) == 1 and "turned automatic collection on at 3.2 s" in changed[0]["message"]
    assert "gc.set_threshold(0)" in changed[0]["message"]
    # The same change 0.3 s after the worker was found is the freeze pattern's post-fork hook.
    s.processes[W2].gc_snapshots[-1]["t"] = 0.3
    assert not [w for w in analysis.warnings(s) if w["code"] == "gc_config_changed"]


def test_threshold_change_is_warned():
    batch = {"gc_snapshots": [snapshot(MASTER, 2.0, 375, reason="changed", thresholds=(0, 10, 10))]}
    changed = [w for w in analysis.warnings(default_session(extra_batch=batch)) if w["code"] == "gc_config_changed"]
    assert "from 700/10/10 to 0/10/10" in changed[0]["message"]


def test_summary_in_plain_words():
    lines = analysis.summary(default_session())
    text = " ".join(lines)
    assert "copied during garbage collection" in text and "outside it" in text
    assert "Most of the copying comes from garbage collection" in text
    assert "would have kept 50 MiB shared" in text
    frozen = " ".join(analysis.summary(frozen_session()))
    assert "reference counting, which gc.freeze() does not prevent" in frozen
    # Issue 31: what is read is the permanent generation's size, not a gc.freeze() call.
    assert "The master's permanent generation (where gc.freeze() moves objects) holds 560,000 objects" in frozen
    assert "The master froze" not in frozen


def test_savings():
    sav = analysis.savings(default_session())
    assert sav["gc_copies_bytes"] == 50 * MIB and sav["refcount_copies_bytes"] == 30 * MIB + MIB // 4
    assert sav["freeze_would_keep_shared_bytes"] == 50 * MIB
    # W2 has GC on and has not run a full collection: it will copy about what W1 did.
    assert sav["workers_without_full_collection"] == 1 and sav["at_risk_bytes"] == 50 * MIB
    assert sav["sharing_saves_bytes"] == sav["rss_sum_bytes"] - sav["pss_sum_bytes"] > 0


def test_tree_timeline_sums_each_pass_and_drops_exited_processes():
    batch = {"processes": [dict(proc(W2, "worker"), exited=3.5)]}
    s = default_session(extra_batch=batch)
    s.processes[W2].samples = [x for x in s.processes[W2].samples if x["pass"] < 3]
    tl = analysis.tree_timeline(s)
    assert [t["processes"] for t in tl] == [3, 3, 3, 2]
    assert tl[0]["uss"] == 9 * MIB


# -- reports -------------------------------------------------------------------------------------------


def test_text_report():
    text = memory_text.render(default_session())
    assert text.startswith("gilty memory: master pid 100")
    assert "worker 101" in text and "CoW in GC" in text
    assert "Warnings:" in text and "Summary:" in text and "Method:" in text
    assert "polled every 1 ms (not uprobes)" in text
    assert "PARTIAL" not in text


def test_partial_text_report_is_marked_first_and_last():
    s = default_session()
    s.mark_partial("master pid 100 exited after 2.0 s of the requested 4 s")
    lines = memory_text.render(s).splitlines()
    assert lines[0].startswith("PARTIAL:") and lines[-1].startswith("PARTIAL:")
    assert memory_json.report(s)["partial"] is True


def test_non_python_process_in_text():
    s = default_session()
    s.processes[W2].gc_snapshots.clear()
    for x in s.processes[W2].samples:
        x["gc"] = None
    s.processes[W2].gc_note = "pid 102 (/bin/sh) is not a Python process"
    assert "is not a Python process" in memory_text.render(s)
    assert memory_json.report(s)["processes"][2]["gc"] is None


def documented_keys() -> set:
    section = DOC.read_text(encoding="utf-8").split("## JSON report", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def key_paths(value, prefix="") -> set:
    paths = set()
    if isinstance(value, dict):
        for key, child in value.items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            paths |= key_paths(child, path)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for item in value:
            paths |= key_paths(item, prefix + "[]")
    return paths


def test_json_keys_match_the_documentation():
    batch = {"gc_snapshots": [snapshot(MASTER, 2.0, 375, reason="changed", thresholds=(0, 10, 10))]}
    report = json.loads(memory_json.render(default_session(extra_batch=batch)))
    documented = documented_keys()
    present = key_paths(report)
    assert documented, "no keys parsed from docs/memory.md"
    assert documented - present == set(), "documented but missing from the report"
    assert present - documented == set(), "in the report but not documented"


def test_json_sizes_are_integer_bytes():
    report = memory_json.report(default_session())
    for p in report["processes"]:
        for key, value in p["cow"].items():
            if key.endswith("_bytes") and value is not None:
                assert isinstance(value, int), key
        for smp in p["samples"]:
            assert all(isinstance(smp[k], int) for k in smp if k != "t")
    assert report["format_version"] == 1 and report["kind"] == "memory"


# Guards: a full-collection warning with no full collection (issue 21: it fired with 0 generation-2
# collections and 0 MiB copied).
def test_no_full_collection_warning_without_full_collections():
    s = default_session()
    s.processes[W1].gc_windows.clear()
    for smp in s.processes[W1].samples:
        smp["gc"]["collections"] = [10, 1, 0]
    assert "worker_gc_unfrozen" not in [w["code"] for w in analysis.warnings(s)]


def test_since_fork_and_preload_in_the_reports():
    s = default_session()
    report = memory_json.report(s)
    w1 = [p for p in report["processes"] if p["pid"] == W1][0]
    assert w1["since_fork"]["private_bytes"] == 53 * MIB and w1["since_fork"]["copied_bytes"] == 52 * MIB
    assert report["preload"]["verdict"] == "preloaded"
    text = memory_text.render(s)
    assert "since fork, MiB" in text and "Preloaded" in text


def test_not_preloaded_when_the_app_module_is_imported_after_fork():
    s = default_session()
    s.processes[MASTER].cmdline = "/usr/bin/python3 -m gunicorn -w 2 -b 127.0.0.1:8000 app:app"
    s.processes[MASTER].fork_facts = [fork_fact(MASTER, 4.0, modules=("sys", "os"))]
    for pid in (W1, W2):
        s.processes[pid].fork_facts = [fork_fact(pid, 4.0, shared=6 * MIB, copied=8 * MIB, new=34 * MIB)]
    pre = analysis.preload(s)
    assert pre["verdict"] == "not_preloaded" and "`app`" in pre["evidence"]
    assert pre["would_save_bytes"] == 34 * MIB
    text = " ".join(analysis.summary(s))
    assert "--preload would" in text and "preloaded heap stays shared" not in text


def test_a_split_that_is_mostly_an_estimate_says_so_and_how_to_know():
    # A touch of shared objects 0.1 s before a full collection, between the same two scans and before
    # any interval without a collection: the split between GC and outside it is a guess.
    assert "is an estimate" not in " ".join(analysis.summary(default_session()))
    batch = {"cow_steps": [step(W2, 3.5, "gc_end", gc=40 * MIB, ambiguous=40 * MIB)]}
    text = " ".join(analysis.summary(default_session(extra_batch=batch)))
    assert "40.0 MiB of that split between GC and outside it is an estimate" in text, text
    assert "`gilty memory --faults` attributes each copy to the code that made it" in text, text
