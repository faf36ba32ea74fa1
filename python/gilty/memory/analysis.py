"""Pure functions over a ``MemorySession``: copy-on-write per process, GC facts, measurement
cost, tree totals, warnings, savings and the summary in plain words."""

from __future__ import annotations

from typing import Optional

from gilty.memory import faults as faults_mod
from gilty.memory.session import MemorySession, ProcessRecord, first_gc_state, last_frozen, last_gc_state
from gilty.memory.since_fork import preload, since_fork_of

MIB = 1 << 20
# Below this per worker, copy-on-write is "little" in the summary.
SMALL_COW_BYTES = 8 * MIB
# A master whose RSS is below this has no heap worth warning about.
LARGE_HEAP_BYTES = 64 * MIB
# A worker's own GC hooks re-enable collection right after fork: not a "change" to warn about.
CHILD_HOOK_GRACE_S = 1.0


# Frozen objects below this share of the oldest generation (objects that survived the last full
# collection), or fewer than FROZEN_FEW, count as "froze next to nothing": a fresh 3.12.1 reports 375
# objects in its permanent generation before anything calls gc.freeze() (python -S too).
FROZEN_SHARE = 0.5
FROZEN_FEW = 1000


def froze_little(rec: Optional[ProcessRecord]) -> Optional[bool]:
    """Nothing, or next to nothing, is frozen in this process (None: unknown, not Python)."""
    if rec is None:
        return None
    frozen, state = last_frozen(rec), last_gc_state(rec)
    if frozen is None or state is None:
        return None
    if frozen["empty"] or (frozen["exact"] and frozen["objects"] < FROZEN_FEW):
        return True
    oldest = state.get("long_lived_total")
    return bool(oldest) and frozen["exact"] and frozen["objects"] < FROZEN_SHARE * oldest


def mib(n: float) -> float:
    return n / MIB


def auto_gc_on(state: Optional[dict]) -> Optional[bool]:
    """Automatic collection happens: enabled and a non-zero first threshold."""
    if not state:
        return None
    return bool(state["enabled"]) and state["thresholds"][0] != 0


# -- per process ---------------------------------------------------------------------------------


def cow_of(rec: ProcessRecord, faults: Optional[dict] = None) -> dict:
    """Copy-on-write of one process over the run, in bytes (the JSON ``cow`` object). With the run's
    sampled copying faults (``--faults``), the bytes the page scans found copied are split between GC
    and outside it in the share the faults measured, and none of the split is an estimate."""
    steps = rec.cow_steps
    during = sum(s["gc_bytes"] for s in steps)
    outside = sum(s["outside_bytes"] for s in steps)
    released = sum(s["released_bytes"] for s in steps)
    sole = sum(s["sole_bytes"] for s in steps)
    growth = rec.samples[-1]["uss"] - rec.samples[0]["uss"] if rec.samples else 0
    baseline = rec.baseline or {}
    shared0 = baseline.get("shared_bytes")
    ambiguous = sum(s["ambiguous_bytes"] for s in steps)
    split_by = "page scans"
    measured = faults_mod.gc_share(faults, rec.pid) if shared0 is not None else None
    if measured is not None:
        # A burst of copying just before a collection lands in the same scan interval as the
        # collection's; the faults tell them apart (fault_server.py: 9.2 MiB touched, then 7.3 MiB
        # collected, read by the scans as 16.5 MiB in GC).
        copied = during + outside
        during = round(copied * measured)
        outside = copied - during
        ambiguous = 0
        split_by = "page faults"
    return {
        "private_growth_bytes": growth,
        "during_gc_bytes": during,
        "outside_gc_bytes": outside,
        "ambiguous_bytes": ambiguous,
        "gc_split_by": split_by,
        "released_bytes": released,
        "sole_owner_bytes": sole,
        "baseline_shared_bytes": shared0,
        "still_shared_bytes": None if shared0 is None else max(0, shared0 - during - outside - released - sole),
        "baseline_t": baseline.get("t"),
        "method": baseline.get("method"),
        "scans": len(steps),
        "gc_triggered_scans": sum(1 for s in steps if s["reason"] in ("gc_start", "gc_end")),
    }


def gc_of(rec: ProcessRecord) -> Optional[dict]:
    """GC configuration and activity of one process (the JSON ``gc`` object), None if not Python."""
    first, last = first_gc_state(rec), last_gc_state(rec)
    if last is None:
        return None
    frozen = last_frozen(rec) or {"objects": None, "exact": False, "empty": last.get("frozen_empty")}
    collections = None
    if first and first.get("collections") and last.get("collections"):
        collections = [b - a for a, b in zip(first["collections"], last["collections"])]
    by_gen = {"0": 0, "1": 0, "2": 0, "unknown": 0}
    for w in rec.gc_windows:
        by_gen[str(w["generation"]) if w["generation"] is not None else "unknown"] += 1
    durations = [w["end"] - w["start"] for w in rec.gc_windows]
    missed = None
    if collections is not None:
        missed = [max(0, c - by_gen[str(g)]) for g, c in enumerate(collections)]
    return {
        "enabled": bool(last["enabled"]),
        "thresholds": list(last["thresholds"]),
        "counts": list(last.get("counts") or []),
        "frozen": frozen["objects"],
        "frozen_exact": frozen["exact"],
        "frozen_empty": frozen["empty"],
        "froze_little": froze_little(rec),
        "long_lived_total": last.get("long_lived_total"),
        "collections_during_run": collections,
        "windows": len(rec.gc_windows),
        "windows_by_generation": by_gen,
        "missed_collections": missed,
        "gc_time_s": sum(durations),
        "longest_pause_s": max(durations) if durations else 0.0,
        "changes": config_changes(rec),
    }


def full_collections(rec: ProcessRecord) -> int:
    """Full (generation 2) collections during the run: counted by the interpreter, or seen by the poller."""
    g = gc_of(rec)
    if g is None:
        return 0
    counted = (g["collections_during_run"] or [0, 0, 0])[2]
    return max(counted, g["windows_by_generation"]["2"])


def config_changes(rec: ProcessRecord) -> list:
    """Changes of the enabled flag, the thresholds or the frozen generation seen during the run."""
    out = []
    prev = None
    for snap in rec.gc_snapshots:
        if prev is not None:
            for key in ("enabled", "thresholds", "frozen_empty"):
                if snap[key] != prev[key]:
                    out.append({"t": snap["t"], "field": key, "before": prev[key], "after": snap[key]})
            if snap["frozen_objects"] != prev["frozen_objects"] and snap["frozen_exact"]:
                out.append({"t": snap["t"], "field": "frozen", "before": prev["frozen_objects"], "after": snap["frozen_objects"]})
        prev = snap
    return out


def cost_of(rec: ProcessRecord) -> dict:
    """What measuring this process cost per pass (seconds)."""
    costs = [s["cost"] for s in rec.samples if s.get("cost")]

    def stats(key: str) -> tuple:
        vals = [c[key] for c in costs]
        return (sum(vals) / len(vals), max(vals)) if vals else (0.0, 0.0)

    per_pass = [c["stat_s"] + c["smaps_s"] + c["gc_s"] + c["pagemap_s"] for c in costs]
    triggered = [s["scan_s"] for s in rec.cow_steps if s["reason"] in ("gc_start", "gc_end")]
    smaps, pagemap = stats("smaps_s"), stats("pagemap_s")
    return {
        "passes": len(costs),
        "per_pass_mean_s": sum(per_pass) / len(per_pass) if per_pass else 0.0,
        "per_pass_max_s": max(per_pass) if per_pass else 0.0,
        "smaps_mean_s": smaps[0],
        "smaps_max_s": smaps[1],
        "pagemap_mean_s": pagemap[0],
        "pagemap_max_s": pagemap[1],
        "stat_mean_s": stats("stat_s")[0],
        "gc_read_mean_s": stats("gc_s")[0],
        "gc_triggered_scans": len(triggered),
        "gc_triggered_scan_mean_s": sum(triggered) / len(triggered) if triggered else 0.0,
        "baseline_scan_s": (rec.baseline or {}).get("scan_s"),
    }


# -- the tree ------------------------------------------------------------------------------------


def tree_timeline(session: MemorySession) -> list:
    """Per pass: the tree's RSS, PSS and USS (each live process's latest sample up to that pass)."""
    passes = sorted({s["pass"] for p in session.processes.values() for s in p.samples})
    out = []
    for n in passes:
        tot = {"pass": n, "t": 0.0, "rss": 0, "pss": 0, "uss": 0, "processes": 0}
        for p in session.processes.values():
            mine = [s for s in p.samples if s["pass"] <= n]
            if not mine or (p.exited is not None and not any(s["pass"] == n for s in p.samples)):
                continue
            s = mine[-1]
            tot["t"] = max(tot["t"], s["t"])
            for k in ("rss", "pss", "uss"):
                tot[k] += s[k]
            tot["processes"] += 1
        out.append(tot)
    return out


def savings(session: MemorySession) -> dict:
    """How much sharing saves now, and what the freeze fix would keep shared (bytes)."""
    timeline = tree_timeline(session)
    last = timeline[-1] if timeline else {"rss": 0, "pss": 0}
    workers = session.workers
    cows = {w.pid: cow_of(w, session.faults) for w in workers}
    gc_copied = sum(c["during_gc_bytes"] for c in cows.values())
    outside = sum(c["outside_gc_bytes"] for c in cows.values())
    # Workers that ran a full collection show what the others will copy when they run theirs.
    collected = [w for w in workers if any(win["generation"] == 2 for win in w.gc_windows)]
    per_full = sum(cows[w.pid]["during_gc_bytes"] for w in collected) / len(collected) if collected else 0
    frozen_everywhere = bool(workers) and all(froze_little(w) is False for w in workers if w.is_python)
    pending = [w for w in workers if w.exited is None and w not in collected and w.is_python and auto_gc_on(last_gc_state(w))]
    return {
        "rss_sum_bytes": last["rss"],
        "pss_sum_bytes": last["pss"],
        "sharing_saves_bytes": max(0, last["rss"] - last["pss"]),
        "gc_copies_bytes": gc_copied,
        "refcount_copies_bytes": outside,
        "freeze_would_keep_shared_bytes": 0 if frozen_everywhere else gc_copied,
        "full_collection_copies_per_worker_bytes": int(per_full),
        "workers_without_full_collection": len(pending),
        "at_risk_bytes": 0 if frozen_everywhere else int(per_full * len(pending)),
    }


# -- warnings ------------------------------------------------------------------------------------


def warnings(session: MemorySession) -> list:
    """Issue 3's warnings: GC on without a freeze, and GC configuration changing during the run."""
    out = []
    master = session.master
    workers = session.workers
    master_state = first_gc_state(master) if master else None
    master_little = froze_little(master)

    if master and master_state and workers and master_little and auto_gc_on(master_state):
        rss = master.samples[0]["rss"] if master.samples else 0
        if rss >= LARGE_HEAP_BYTES:
            collected = len(master.gc_windows)
            during = f"; it collected {collected} time{'s' * (collected != 1)} during the run" if collected else ""
            out.append(
                {
                    "code": "master_gc_unfrozen",
                    "pids": [master.pid],
                    "message": (
                        f"the master (pid {master.pid}) keeps automatic garbage collection on and froze next to nothing "
                        f"(gc.freeze()) while {len(workers)} worker{'s' * (len(workers) != 1)} share its "
                        f"{mib(rss):.0f} MiB heap{during}: each worker's first full collection will copy the pages of "
                        "every object it traverses. Disable GC early in the master and freeze before forking "
                        "(gilty.memory.prefork, docs/prefork.md)."
                    ),
                }
            )

    master_unknown = master_little is None
    if master_little or master_unknown:
        # Only workers that ran a full collection during the run: a warning about full collections
        # copying the heap needs one to have happened (the risk alone is master_gc_unfrozen's).
        unfrozen = [w for w in workers if auto_gc_on(last_gc_state(w)) and froze_little(w) and full_collections(w)]
        if unfrozen:
            copied = sum(cow_of(w, session.faults)["during_gc_bytes"] for w in unfrozen)
            pids = [w.pid for w in unfrozen]
            plural = len(pids) != 1
            whose = "the master froze next to nothing" if not master_unknown else "next to nothing is frozen"
            out.append(
                {
                    "code": "worker_gc_unfrozen",
                    "pids": pids,
                    "message": (
                        f"worker{'s' * plural} {', '.join(map(str, pids))} ha{'ve' if plural else 's'} automatic garbage "
                        f"collection on while {whose}: full collections traverse, and copy, the whole inherited heap "
                        f"({mib(copied):.1f} MiB copied during collections in this run)."
                    ),
                }
            )

    for rec in session.ordered():
        for change in config_changes(rec):
            if change["field"] not in ("enabled", "thresholds"):
                continue
            if (
                rec.role == "worker"
                and change["field"] == "enabled"
                and change["after"]
                and change["t"] - rec.first_seen < CHILD_HOOK_GRACE_S
            ):
                continue  # the child hook of the freeze pattern
            if change["field"] == "enabled":
                what = f"turned automatic collection {'on' if change['after'] else 'off'}"
                hint = (
                    " (a library calling gc.enable()? msgpack did at Instagram; gc.set_threshold(0) "
                    "cannot be undone that way: GILTY_PREFORK_GC=threshold0)"
                    if change["after"]
                    else ""
                )
            else:
                before = "/".join(map(str, change["before"]))
                after = "/".join(map(str, change["after"]))
                what, hint = f"changed its GC thresholds from {before} to {after}", ""
            out.append(
                {
                    "code": "gc_config_changed",
                    "pids": [rec.pid],
                    "message": f"{rec.role} pid {rec.pid} {what} at {change['t']:.1f} s{hint}.",
                }
            )
    return out


# -- summary -------------------------------------------------------------------------------------


# At least this share of the copied bytes split by estimate: the summary says so and how to know.
ESTIMATED_SPLIT_SHARE = 0.25


def gc_split(session: MemorySession) -> dict:
    """The workers' copying split between garbage collection and outside it, in bytes, with the part
    of the split that is an estimate and, when that part is large, the summary's sentence saying so."""
    workers = session.workers
    cows = [cow_of(w, session.faults) for w in workers]
    gc_b = sum(c["during_gc_bytes"] for c in cows)
    out_b = sum(c["outside_gc_bytes"] for c in cows)
    estimated = sum(c["ambiguous_bytes"] for c in cows)
    tracked = any(c["baseline_shared_bytes"] is not None for c in cows)
    per_worker = (gc_b + out_b) / len(workers) if workers else 0.0
    caveat = None
    if tracked and per_worker >= SMALL_COW_BYTES and estimated >= ESTIMATED_SPLIT_SHARE * (gc_b + out_b):
        # A collection and other copying between the same two scans, before any interval without a
        # collection gave the background rate: the split above is a guess (measured: a touch 0.1 s
        # before a collection, 18.4 MiB per worker outside GC, read as 31.8 of 32.1 MiB in GC).
        more = (
            "the copies by code are below"
            if session.faults is not None
            else "`gilty memory --faults` attributes each copy to the code that made it"
        )
        caveat = (
            f"{mib(estimated):.1f} MiB of that split between GC and outside it is an estimate (copying outside a "
            f"collection and the collection fell between the same two page scans): {more}."
        )
    return {
        "tracked": tracked,
        "during_gc_bytes": gc_b,
        "outside_gc_bytes": out_b,
        "estimated_bytes": estimated,
        "caveat": caveat,
    }


def summary(session: MemorySession) -> list:
    """Issue 5: how much the tree would save, where private growth comes from, what to do."""
    lines = []
    workers = session.workers
    timeline = tree_timeline(session)
    sav = savings(session)
    n = len(workers)
    if timeline:
        last = timeline[-1]
        h = len(session.helpers)
        who = (
            f"master, {n} worker{'s' * (n != 1)} and {h} helper{'s' * (h != 1)}"
            if h
            else f"master and {n} worker{'s' * (n != 1)}"
        )
        lines.append(
            f"The tree ({who}) uses {mib(last['pss']):.0f} MiB (PSS); its processes' "
            f"RSS adds up to {mib(last['rss']):.0f} MiB, so sharing pages saves {mib(sav['sharing_saves_bytes']):.0f} MiB."
        )
    if not workers:
        lines.append("No worker process was found below the master: nothing is shared by fork.")
        return lines
    cows = [cow_of(w, session.faults) for w in workers]
    growth = sum(c["private_growth_bytes"] for c in cows)
    gc_b = sum(c["during_gc_bytes"] for c in cows)
    out_b = sum(c["outside_gc_bytes"] for c in cows)
    tracked = any(c["baseline_shared_bytes"] is not None for c in cows)
    if tracked:
        new = max(0, growth - gc_b - out_b)
        lines.append(
            f"During the recording ({session.duration_s:.0f} s) the workers' private memory (USS) grew by {mib(growth):.1f} MiB: "
            f"{mib(gc_b):.1f} MiB of pages shared with the master were copied during garbage collection, "
            f"{mib(out_b):.1f} MiB outside it (reference counting: code reading shared objects, and other writes), "
            f"and {mib(new):.1f} MiB is other growth (new allocations)."
        )
    else:
        lines.append(
            f"During the recording ({session.duration_s:.0f} s) the workers' private memory (USS) grew by {mib(growth):.1f} MiB."
        )
    lines.extend(_since_fork_lines(session))
    pre = preload(session)
    split = gc_split(session)
    per_worker = (gc_b + out_b) / n
    if tracked and per_worker < SMALL_COW_BYTES:
        stays = ": the preloaded heap stays shared" if pre["verdict"] == "preloaded" else ""
        lines.append(f"Little was copied during the recording ({mib(per_worker):.1f} MiB per worker on average){stays}.")
    elif tracked and split["caveat"]:
        # The split is mostly the estimate's (the caveat below says how much): no cause is named on it.
        lines.append(
            "Whether garbage collection or reference counting made most of these copies is not known from the page "
            "scans: copying and collections fell between the same two scans."
        )
    elif tracked and gc_b >= out_b:
        if sav["freeze_would_keep_shared_bytes"]:
            lines.append(
                f"Most of the copying comes from garbage collection: freezing the heap before forking (gilty.memory.prefork: "
                f"GC off early in the master, gc.freeze() before fork, GC on in each worker) would have kept "
                f"{mib(gc_b):.0f} MiB shared."
            )
        else:
            lines.append(
                "Most of the copying happened during collections although objects are frozen: objects created "
                "after the freeze, or a freeze that came too late (after the heap was built and collected)."
            )
    elif tracked:
        lines.append(
            "Most of the copying comes from reference counting, which gc.freeze() does not prevent: every object a "
            "worker reads gets its reference count written. Keep large read-mostly data out of Python objects "
            "(arrays, mmap'd files, a cache server), touch less of it per request, or recycle workers "
            "(gunicorn --max-requests)."
        )
    if split["caveat"]:
        lines.append(split["caveat"])
    if sav["at_risk_bytes"] >= SMALL_COW_BYTES:
        lines.append(
            f"{sav['workers_without_full_collection']} worker(s) have not run a full collection yet; each will copy about "
            f"{mib(sav['full_collection_copies_per_worker_bytes']):.0f} MiB when it does "
            f"({mib(sav['at_risk_bytes']):.0f} MiB in all)."
        )
    master = session.master
    frozen = last_frozen(master) if master else None
    if frozen and froze_little(master) is False:
        # What is read is the permanent generation's size, not who put the objects there: gc.freeze()
        # does, and so does the interpreter's own start-up on some versions.
        count = f"{frozen['objects']:,}" + ("" if frozen["exact"] else " or more")
        lines.append(
            f"The master's permanent generation (where gc.freeze() moves objects) holds {count} objects, counted in "
            "its GC lists from outside: the workers inherit them frozen, and their collections skip them."
        )
    if session.partial:
        lines.append(f"PARTIAL: {session.partial_reason}.")
    return lines


def _since_fork_lines(session: MemorySession) -> list:
    """Since fork: the workers' pages against the master's, and whether they were preloaded."""
    facts = [f for f in (since_fork_of(w) for w in session.workers if w.exited is None) if f]
    if not facts:
        return []
    k = len(facts)

    def avg(key: str) -> float:
        return mib(sum(f[key] for f in facts) / k)

    lines = [
        f"Since fork (each worker's pages against the master's at the same addresses, at the end): a worker on "
        f"average still shares {avg('shared_with_parent_bytes'):.1f} MiB with the master, has copied "
        f"{avg('copied_bytes'):.1f} MiB of it and allocated {avg('new_bytes'):.1f} MiB of its own: "
        f"{avg('private_bytes'):.1f} MiB private since fork."
    ]
    pre = preload(session)
    n = len(session.workers)
    if pre["verdict"] == "not_preloaded":
        each = mib(pre["footprint_per_worker_bytes"] or 0)
        save = mib(pre["would_save_bytes"] or 0)
        if pre["gunicorn"]:
            lines.append(
                f"Not preloaded: each worker imported the application itself after fork ({pre['evidence']}). "
                f"Each holds its own {each:.0f} MiB of imports and start-up objects; --preload would load them once "
                f"in the master and share them: about {save:.0f} MiB saved for {n} workers, less what reference "
                "counting and collections copy back (freeze before fork: gilty.memory.prefork)."
            )
        else:
            lines.append(
                f"Not preloaded: the workers built most of their memory after fork ({pre['evidence']}). Each holds "
                f"its own {each:.0f} MiB; built in the master before forking it would be shared: about {save:.0f} MiB "
                f"saved for {n} workers, less what reference counting and collections copy back."
            )
    elif pre["verdict"] == "preloaded":
        lines.append(f"Preloaded: the workers found the application in the master's memory at fork ({pre['evidence']}).")
    elif pre["verdict"] == "unclear":
        lines.append(f"Preloaded or not is unclear: {pre['evidence']}.")
    return lines
