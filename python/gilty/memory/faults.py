"""Who copied the pages the workers share with their master (``gilty memory --faults``): the sampled
minor page faults that copied a shared page (``_native.FaultWatch``, see
crates/gilty-core/src/memory/faults.rs), each joined with its thread's Python stack of the same
moment, turned into bytes per Python function (the innermost frame), with the C function that
faulted beneath it and the share that happened during a garbage collection.

Bytes are copied faults x the page size x the sampling period (each sample stands for ``period``
faults), scaled up by the records the kernel dropped, if any (they are taken to be like the rest).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from gilty.sampling.native_frames import frame_text

TOP_N = 15
NO_STACK = "(no Python stack)"
GC_FRAME = "[garbage collection]"


def _scale(raw: dict) -> float:
    """Bytes one copied sample stands for."""
    per_sample = raw["period"] * raw["page_size"]
    seen = raw["samples"]
    lost = raw.get("lost", 0)
    return per_sample * ((seen + lost) / seen if seen else 1.0)


def _label(frame) -> str:
    function, file, line = frame
    return frame_text(function, file, line, short=True)


def _function_key(frames: list) -> tuple:
    """(function, file) of the innermost frame: lines of one function are one row."""
    if not frames:
        return (NO_STACK, "")
    function, file, _ = frames[0]
    return (function, file)


def functions(raw: dict, top: int = TOP_N) -> list:
    """The Python functions whose writes copied shared pages, most bytes first: each
    {"function", "file", "bytes", "share", "gc_bytes", "c_functions": [{"name", "bytes"}], "workers"}."""
    scale = _scale(raw)
    total = sum(r["samples"] for r in raw["rows"]) or 1
    acc: dict = {}
    for r in raw["rows"]:
        key = _function_key(r["frames"])
        a = acc.setdefault(key, {"samples": 0, "gc": 0, "c": defaultdict(int), "pids": set()})
        a["samples"] += r["samples"]
        a["gc"] += r["samples"] if r["gc"] else 0
        a["c"][r["c_function"] or "[unknown]"] += r["samples"]
        a["pids"].add(r["pid"])
    out = []
    for (function, file), a in sorted(acc.items(), key=lambda kv: -kv[1]["samples"]):
        c = sorted(a["c"].items(), key=lambda kv: -kv[1])
        out.append(
            {
                "function": function,
                "file": file,
                "bytes": round(a["samples"] * scale),
                "share": a["samples"] / total,
                "gc_bytes": round(a["gc"] * scale),
                "c_functions": [{"name": name, "bytes": round(n * scale)} for name, n in c[:3]],
                "workers": sorted(a["pids"]),
            }
        )
    return out[:top] if top else out


def collapsed(raw: dict) -> list:
    """Collapsed stacks (outermost first; then a GC marker frame while collecting; then the C function
    that faulted), counted in KiB copied: the flame graph's input."""
    scale = _scale(raw) / 1024
    acc: dict = defaultdict(float)
    for r in raw["rows"]:
        parts = [_label(f).replace(";", ",") for f in reversed(r["frames"])] or [NO_STACK]
        if r["gc"]:
            parts.append(GC_FRAME)
        parts.append(f"{r['c_function'] or '[unknown]'} [C]")
        acc[";".join(parts)] += r["samples"] * scale
    return [f"{stack} {round(kib)}" for stack, kib in sorted(acc.items(), key=lambda kv: -kv[1]) if round(kib) > 0]


# Copying samples of one worker needed before its copies are split between GC and outside it by
# them: a share read from fewer is mostly noise.
MIN_SPLIT_SAMPLES = 20


def gc_share(raw: Optional[dict], pid: int) -> Optional[float]:
    """The share of ``pid``'s sampled copying faults taken during a collection (None: no --faults, or
    too few of its faults sampled). A fault is in GC or not when it happens, so this is measured, where
    the page scans' split of an interval holding both is an estimate."""
    if raw is None:
        return None
    rows = [r for r in raw["rows"] if r["pid"] == pid]
    n = sum(r["samples"] for r in rows)
    if n < MIN_SPLIT_SAMPLES:
        return None
    return sum(r["samples"] for r in rows if r["gc"]) / n


def per_worker(raw: dict) -> dict:
    scale = _scale(raw)
    acc: dict = defaultdict(int)
    for r in raw["rows"]:
        acc[r["pid"]] += r["samples"]
    return {str(pid): round(n * scale) for pid, n in sorted(acc.items())}


def summary(raw: Optional[dict]) -> Optional[dict]:
    """The JSON ``faults`` object (None: --faults was not asked for)."""
    if raw is None:
        return None
    elapsed = raw["elapsed_s"] or 1e-9
    copied_bytes = round(raw["copied"] * _scale(raw))
    gc_samples = sum(r["samples"] for r in raw["rows"] if r["gc"])
    return {
        "method": raw["method"],
        "period": raw["period"],
        "page_size": raw["page_size"],
        "copied_bytes": copied_bytes,
        "gc_bytes": round(gc_samples * _scale(raw)),
        "samples": raw["samples"],
        "copied_samples": raw["copied"],
        "other_samples": raw["other"],
        "no_stack_samples": raw["no_stack"],
        "lost_records": raw["lost"],
        "functions": functions(raw),
        "per_worker_bytes": per_worker(raw),
        "collapsed": collapsed(raw),
        "join": {
            "lag_p50_s": raw["lag_p50_s"],
            "lag_p99_s": raw["lag_p99_s"],
            "lag_max_s": raw["lag_max_s"],
            "late_samples": raw["late"],
            "stack_reads": raw["stack_reads"],
            "stack_failures": raw["stack_failures"],
        },
        "cost": {
            "samples_per_s": raw["samples"] / elapsed,
            "reader_cpu_s": raw["cpu_s"],
            "reader_cpu_share": raw["cpu_s"] / elapsed,
            "elapsed_s": raw["elapsed_s"],
        },
        "workers": raw["workers"],
        "errors": [{"pid": pid, "error": e} for pid, e in raw["errors"]],
    }
