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
        lines.append(f"Thread {thread['tid']} '{visible(thread['name'])}' ({state})")
        if not thread["stack"]:
            lines.append("    (no Python stack)")
        for function, file, line in thread["stack"]:
            lines.append(f"    {visible(function)} ({visible(file)}:{line})")
    text = "\n".join(lines) + "\n"
    if "tasks" in snapshot:
        from gilty.report import tasks  # only with --tasks

        names = {t["tid"]: visible(t["name"]) for t in snapshot["threads"]}
        text += "\n" + tasks.render_text(snapshot["tasks"], names)
    return text


def dump_report(target_info: dict, snapshot: dict, syscall_name: Callable[[int], str]) -> dict:
    """The JSON form of one `gilty dump` snapshot."""
    threads = []
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
                "stack": [{"function": f, "file": file, "line": line} for f, file, line in thread["stack"]],
            }
        )
    report = {"format_version": FORMAT_VERSION, "target": target_info, "threads": threads}
    if "tasks" in snapshot:
        from gilty.report import tasks  # only with --tasks

        report["asyncio"] = tasks.tasks_report(snapshot["tasks"])
    return report


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
