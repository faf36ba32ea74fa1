"""`gilty dump --tasks`: the asyncio tasks of one snapshot, as a tree per event loop (text) and as the
`asyncio` object of the JSON dump (docs/asyncio.md describes every field)."""

from __future__ import annotations

from gilty.report.labels import visible  # names the target chose: escaped and cut, as in every text output


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _site(task: dict) -> str:
    """The innermost frame outside asyncio itself: where the task's own code awaits."""
    for function, file, line in task["stack"]:
        if "/asyncio/" not in file:
            return f"{visible(function)} ({visible(_short(file))}:{line})"
    if task["stack"]:
        function, file, line = task["stack"][0]
        return f"{visible(function)} ({visible(_short(file))}:{line})"
    return "?"


def _task_line(task: dict, names: dict) -> str:
    head = f"{visible(task['name'])} [{task['state']}] 0x{task['id']:x}"
    if task.get("python_impl"):
        head += " (Python Task)"
    if task.get("eager"):
        head += " (eager)"
    if task.get("parent_via"):
        head += f" via {task['parent_via']}"
    aw = task.get("awaiting")
    if aw:
        what = aw["kind"]
        if aw["kind"] == "task":
            what = f"task {visible(names.get(aw['address'], hex(aw['address'])))}"
        head += f": awaiting {what} at {_site(task)}"
    elif task["state"] == "running":
        head += " <- running"
    return head


def render_text(tasks: dict, thread_names: dict) -> str:
    """The `Tasks` part of a text dump. ``thread_names`` maps tid to thread name."""
    lines = []
    others = tasks.get("other_frameworks") or []
    for name in others:
        lines.append(f"{name}: imported, but its tasks are not read (gilty reads asyncio tasks only)")
    if not tasks.get("asyncio_imported"):
        lines.append("asyncio: not imported, no tasks")
        return "\n".join(lines) + "\n"
    by_loop: dict = {}
    for t in tasks["tasks"]:
        by_loop.setdefault(t["loop"], []).append(t)
    names = {t["id"]: t["name"] for t in tasks["tasks"]}
    loops = {lp["address"]: lp for lp in tasks["loops"]}
    for address in sorted(by_loop, key=lambda a: (loops.get(a, {}).get("tid") or 0, a)):
        group = by_loop[address]
        lp = loops.get(address, {})
        tid = lp.get("tid")
        where = f"thread {tid} '{visible(thread_names.get(tid, ''))}'" if tid is not None else "thread unknown"
        lines.append("")
        lines.append(f"Event loop 0x{address:x} ({lp.get('type', '?')}) on {where}: {len(group)} task(s)")
        ids = {t["id"] for t in group}
        children: dict = {}
        for t in group:
            parent = t.get("parent") if t.get("parent") in ids else None
            children.setdefault(parent, []).append(t)

        def walk(task: dict, prefix: str, last: bool, depth: int) -> None:
            branch = "" if depth == 0 else ("└─ " if last else "├─ ")
            lines.append(f"  {prefix}{branch}{_task_line(task, names)}")
            inner = prefix + ("" if depth == 0 else ("   " if last else "│  "))
            kids = sorted(children.get(task["id"], []), key=lambda k: k["name"])
            bar = "│  " if kids else "   "
            for function, file, line in task["stack"]:
                lines.append(f"  {inner}{bar}    {visible(function)} ({visible(file)}:{line})")
            for i, kid in enumerate(kids):
                walk(kid, inner, i == len(kids) - 1, depth + 1)

        for root in sorted(children.get(None, []), key=lambda k: k["name"]):
            walk(root, "", True, 0)
    errors = tasks.get("errors", {})
    dropped = errors.get("torn_dropped", 0) + errors.get("unreadable", 0)
    if dropped:
        lines.append("")
        lines.append(f"({dropped} task(s) changed while read and were left out; {errors.get('changed', 0)} started or ended during the dump)")
    return "\n".join(lines) + "\n"


def tasks_report(tasks: dict) -> dict:
    """The `asyncio` object of the JSON dump."""
    return {
        "asyncio_imported": tasks["asyncio_imported"],
        "other_frameworks": list(tasks.get("other_frameworks") or []),
        "loops": [dict(lp) for lp in tasks["loops"]],
        "tasks": [
            {
                "id": t["id"],
                "name": t["name"],
                "state": t["state"],
                "loop": t["loop"],
                "python_impl": t["python_impl"],
                "eager": t["eager"],
                "parent": t["parent"],
                "parent_via": t["parent_via"],
                "awaiting": t["awaiting"],
                "stack": [{"function": f, "file": file, "line": line} for f, file, line in t["stack"]],
            }
            for t in tasks["tasks"]
        ],
        "errors": dict(tasks["errors"]),
    }


def tasks_json_lines(asyncio_report: dict) -> str:
    """The `asyncio` object as JSON with one line per loop and per task (for `render_json`)."""
    import json

    compact = json.JSONEncoder(ensure_ascii=True).encode
    parts = []
    for key, value in asyncio_report.items():
        if key in ("loops", "tasks"):
            items = ",\n      ".join(compact(v) for v in value)
            body = f"[\n      {items}\n    ]" if value else "[]"
        else:
            body = compact(value)
        parts.append(f'    "{key}": {body}')
    return "{\n" + ",\n".join(parts) + "\n  }"
