"""`gilty dump`'s two forms: py-spy-dump style text and JSON. Imports nothing heavy: a dump is
one snapshot, and its start-up time is most of what the command costs."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Callable

from gilty.report.labels import visible
from gilty.sampling.analysis.syscalls import idle_kind, idle_label
from gilty.sampling.thread_states import IDLE, STATE_NAMES

# The JSON report's format version (json_report.FORMAT_VERSION re-exports it).
FORMAT_VERSION = 1


def _state_name(state: int) -> str:
    return STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else "unknown"


def _dump_state(state: int, syscall: int, syscall_name: Callable[[int], str]) -> str:
    if state == IDLE and syscall >= 0:
        return f"idle: {idle_label(syscall_name(syscall))}"
    return _state_name(state)


def render_text(target_info: dict, snapshot: dict, syscall_name: Callable[[int], str]) -> str:
    """Every thread of one `Target.dump()` snapshot, py-spy-dump style."""
    lines = [
        f"Process {target_info['pid']}: Python {target_info['python_version']} ({visible(target_info['executable'], 0)})",
    ]
    for thread in snapshot["threads"]:
        lines.append("")
        state = _dump_state(thread["state"], thread.get("syscall", -1), syscall_name)
        if thread.get("handling_exception"):
            state += f"; handling {visible(thread['handling_exception'])}"
        lines.append(f"Thread {thread['tid']} '{visible(thread['name'])}' ({state})")
        if "native_stack" in thread:
            if "native_error" in thread:
                lines.append(f"    (native stack partly [unknown]: {thread['native_error']})")
            lines.extend(f"    {_mixed_text(f)}" for f in thread["native_stack"])
            continue
        if "native_error" in thread:
            lines.append(f"    (native stack missing: {thread['native_error']})")
        if not thread["stack"]:
            lines.append("    (no Python stack)")
        if thread.get("locals_error"):
            lines.append(f"    (variables not read: {thread['locals_error']})")
        frame_locals = thread.get("locals") or [None] * len(thread["stack"])
        for (function, file, line), variables in zip(thread["stack"], frame_locals):
            lines.append(f"    {visible(function)} ({visible(file)}:{line})" if file else f"    {visible(function)}")
            if variables is not None:
                lines.extend(_locals_lines(*variables))
    text = "\n".join(lines) + "\n"
    if "tasks" in snapshot:
        from gilty.report import tasks  # only with --tasks

        names = {t["tid"]: visible(t["name"]) for t in snapshot["threads"]}
        text += "\n" + tasks.render_text(snapshot["tasks"], names)
    return text


def native_label(function: str | None, library: str | None, offset: int) -> str:
    """A native frame's name: its function, else `library+0xOFFSET`, else `[unknown]`."""
    if function:
        return function
    if library:
        return f"{library.rsplit('/', 1)[-1]}+{offset:#x}"
    return "[unknown]"


def _mixed_text(frame: tuple) -> str:
    kind, function, where, at = frame[:4]
    if kind == "py":
        return f"{visible(function)} ({visible(where)}:{at})"
    label = visible(native_label(function, where, at))
    source, line = frame[4:6] if len(frame) >= 6 else (None, None)
    if source is not None and line is not None:
        # As Python frames show theirs: the source file and line, where the library has line tables.
        return f"{label} ({visible(source)}:{line})"
    lib = where.rsplit("/", 1)[-1] if where else None
    return f"{label} ({visible(lib)}+{at:#x})" if function and lib else label


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


def _locals_lines(variables: list | None, error: str | None) -> list[str]:
    """py-spy's layout: the arguments, then the other locals, under each frame."""
    if variables is None:
        return [f"        (variables not read: {error})"]
    out = []
    args = [(n, r) for n, is_arg, r in variables if is_arg]
    others = [(n, r) for n, is_arg, r in variables if not is_arg]
    for title, group in (("Arguments", args), ("Locals", others)):
        if group:
            out.append(f"        {title}:")
            out.extend(f"            {visible(name)}: {visible(text, 0)}" for name, text in group)
    return out


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
                "state": _state_name(state),
                "syscall": name,
                "idle_kind": idle_kind(name) if name is not None and state == IDLE else None,
                "handling_exception": thread.get("handling_exception"),
                "stack": _stack_json(thread),
            }
        )
        for key in ("locals_error", "positions_error", "native_error"):
            if key in thread:
                threads[-1][key] = thread[key]
        if "native_stack" in thread:
            threads[-1]["native_stack"] = [_mixed_json(f) for f in thread["native_stack"]]
        if "native_error" in thread:
            missing += 1
    report = {"format_version": FORMAT_VERSION, "target": target_info, "threads": threads}
    if any("native_stack" in t or "native_error" in t for t in snapshot["threads"]):
        report["errors"] = {"native_missing": missing}
    if "tasks" in snapshot:
        from gilty.report import tasks  # only with --tasks

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
    from gilty.report.tasks import tasks_json_lines

    return text[: text.rindex("}")].rstrip() + ',\n  "asyncio": ' + tasks_json_lines(tasks) + "\n}\n"


def render_dump_text(d) -> str:
    """Every process read, one after another (``gilty.sampling.dump.Dump``)."""
    return "\n".join(render_text(info, snap, d.syscall_name) for info, snap in d.snapshots)


def render_dump_json(d) -> str:
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
