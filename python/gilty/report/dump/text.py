"""`gilty dump`'s text, py-spy-dump style. Imports nothing heavy: a dump is one snapshot, and its
start-up time is most of what the command costs."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import Callable

from gilty.report.labels import visible
from gilty.sampling.analysis.syscalls import idle_label
from gilty.sampling.thread_states import IDLE, STATE_NAMES


def thread_state(state: int) -> str:
    return STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else "unknown"


def _dump_state(state: int, syscall: int, syscall_name: Callable[[int], str]) -> str:
    if state == IDLE and syscall >= 0:
        return f"idle: {idle_label(syscall_name(syscall))}"
    return thread_state(state)


def render_text(target_info: dict, snapshot: dict, syscall_name: Callable[[int], str]) -> str:
    """Every thread of one `Target.dump()` snapshot, py-spy-dump style."""
    lines = [
        f"Process {target_info['pid']}: Python {target_info['python_version']} ({visible(target_info['executable'], 0)})",
    ]
    if "core" in target_info:
        lines[0] += f" from core file {visible(target_info['core'], 0)}"
    lines.extend(f"Diagnosis: {visible(d, 0)}" for d in snapshot.get("diagnosis", ()))
    for thread in snapshot["threads"]:
        lines.append("")
        state = _dump_state(thread["state"], thread.get("syscall", -1), syscall_name)
        if thread.get("handling_exception"):
            state += f"; handling {visible(thread['handling_exception'])}"
        lines.append(f"Thread {thread['tid']} '{visible(thread['name'])}' ({state})")
        if "waiting_for_lock" in thread:
            lines.append(f"    (waiting to acquire {_lock_text(thread['waiting_for_lock'])})")
        if "native_stack" in thread:
            if "native_error" in thread:
                lines.append(f"    (native stack partly [unknown]: {thread['native_error']})")
            lines.extend(f"    {_mixed_text(f)}" for f in thread["native_stack"])
            continue
        if "native_error" in thread:
            lines.append(f"    (native stack missing: {thread['native_error']})")
        if thread.get("stack_error"):
            lines.append(f"    (Python stack not read: {thread['stack_error']})")
        elif not thread["stack"]:
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
        from gilty.report.dump import tasks  # only with --tasks

        names = {t["tid"]: visible(t["name"]) for t in snapshot["threads"]}
        text += "\n" + tasks.render_text(snapshot["tasks"], names)
    return text


def _lock_text(lock: dict) -> str:
    held = {True: "held", False: "free", None: "state unknown"}[lock["locked"]]
    owner = f" by thread {lock['owner_tid']}" if lock.get("owner_tid") is not None else ""
    return f"{lock['type']} at {lock['address']:#x}, {held}{owner}"


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


def render(d) -> str:
    """Every process read, one after another (``gilty.sampling.dump.Dump``)."""
    return "\n".join(render_text(info, snap, d.syscall_name) for info, snap in d.snapshots)
