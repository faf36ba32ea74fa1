"""`gilty dump`'s JSON. Imports nothing heavy (`json` itself only when rendering), as the text."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Callable

from gilty.report.dump.text import native_label, thread_state
from gilty.sampling.analysis.syscalls import idle_kind
from gilty.sampling.thread_states import IDLE

# The JSON report's format version (the recording's JSON, report.recording.json, shares it).
FORMAT_VERSION = 1


def _mixed_json(frame: tuple) -> dict:
    kind, function, where, at = frame[:4]
    if kind == "py":
        return {"kind": "python", "function": function, "file": where, "line": at}
    source, line = frame[4:6] if len(frame) >= 6 else (None, None)
    return {
        "kind": "native",
        "function": function,
        "library": where,
        "offset": at,
        "label": native_label(function, where, at),
        "file": source,
        "line": line,
    }


def _frame_json(frame: tuple, variables: tuple | None, position: tuple | None, with_positions: bool) -> dict:
    function, file, line = frame
    out = {"function": function, "file": file, "line": line}
    if with_positions:
        out["position"] = None if position is None else dict(zip(("line", "end_line", "column", "end_column"), position))
    if variables is not None:
        found, error = variables
        out["locals"] = None if found is None else [{"name": n, "arg": a, "repr": r} for n, a, r in found]
        if error is not None:
            out["locals_error"] = error
    return out


def dump_report(target_info: dict, snapshot: dict, syscall_name: Callable[[int], str]) -> dict:
    """The JSON form of one `gilty dump` snapshot."""
    threads = []
    missing = 0
    for thread in snapshot["threads"]:
        state = thread["state"]
        syscall = thread.get("syscall", -1)
        name = syscall_name(syscall) if syscall >= 0 else None
        threads.append(
            {
                "tid": thread["tid"],
                "name": thread["name"],
                "state": thread_state(state),
                "syscall": name,
                "idle_kind": idle_kind(name) if name is not None and state == IDLE else None,
                "handling_exception": thread.get("handling_exception"),
                "stack": _stack_json(thread),
            }
        )
        for key in ("locals_error", "positions_error", "native_error", "waiting_for_lock", "stack_error"):
            if key in thread:
                threads[-1][key] = thread[key]
        if "native_stack" in thread:
            threads[-1]["native_stack"] = [_mixed_json(f) for f in thread["native_stack"]]
        if "native_error" in thread:
            missing += 1
    report = {"format_version": FORMAT_VERSION, "target": target_info, "threads": threads}
    if "diagnosis" in snapshot:
        report["diagnosis"] = snapshot["diagnosis"]
    if any("native_stack" in t or "native_error" in t for t in snapshot["threads"]):
        report["errors"] = {"native_missing": missing}
    if "tasks" in snapshot:
        from gilty.report.dump import tasks  # only with --tasks

        report["asyncio"] = tasks.tasks_report(snapshot["tasks"])
    return report


def _stack_json(thread: dict) -> list:
    stack = thread["stack"]
    # A thread whose frames could not be read again has positions: none, and says why.
    with_positions = "positions" in thread or "positions_error" in thread
    variables = thread.get("locals") or [None] * len(stack)
    positions = thread.get("positions") or [None] * len(stack)
    return [_frame_json(f, v, p, with_positions) for f, v, p in zip(stack, variables, positions)]


def render_json(target_info: dict, snapshot: dict, syscall_name: Callable[[int], str]) -> str:
    import json  # here: the text form, the default, does not need it (≈ 3 ms of start-up)

    report = dump_report(target_info, snapshot, syscall_name)
    tasks = report.pop("asyncio", None)
    text = json.dumps(report, indent=2)
    if tasks is None:
        return text + "\n"
    # Thousands of tasks: one line each, written by the C encoder (with `indent` json falls back to
    # its pure-Python encoder, four times slower on 10,000 tasks). The same JSON, laid out differently.
    from gilty.report.dump.tasks import tasks_json_lines

    return text[: text.rindex("}")].rstrip() + ',\n  "asyncio": ' + tasks_json_lines(tasks) + "\n}\n"


def render(d) -> str:
    """One process's report, or with --subprocesses every process's and those skipped."""
    if d.single:
        info, snap = d.snapshots[0]
        return render_json(info, snap, d.syscall_name)
    import json  # here: the text form, the default, does not need it

    report = {
        "format_version": FORMAT_VERSION,
        "processes": [dump_report(info, snap, d.syscall_name) for info, snap in d.snapshots],
        "skipped": d.skipped,
    }
    return json.dumps(report, indent=2) + "\n"
