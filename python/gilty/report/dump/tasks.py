"""`gilty dump --tasks`: the asyncio tasks of one snapshot, as a tree per event loop (text) and as the
`asyncio` object of the JSON dump (docs/asyncio.md describes every field)."""

from __future__ import annotations

from gilty.report.dump import await_cycles
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


def _task_line(task: dict, names: dict, in_cycle: set) -> str:
    head = f"{visible(task['name'])} [{task['state']}] 0x{task['id']:x}"
    if task["id"] in in_cycle:
        head += " (deadlock: in an await cycle)"
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
    cycles, in_cycle = await_cycles.find(tasks["tasks"])
    loop_of = {t["id"]: t["loop"] for t in tasks["tasks"]}
    for address in sorted(by_loop, key=lambda a: (loops.get(a, {}).get("tid") or 0, a)):
        group = by_loop[address]
        lp = loops.get(address, {})
        tid = lp.get("tid")
        where = f"thread {tid} '{visible(thread_names.get(tid, ''))}'" if tid is not None else "thread unknown"
        lines.append("")
        lines.append(f"Event loop 0x{address:x} ({lp.get('type', '?')}) on {where}: {len(group)} task(s)")
        for cycle in cycles:
            if loop_of[cycle[0]] == address:
                ring = " → ".join(f"{visible(names[i])} 0x{i:x}" for i in cycle + cycle[:1])
                lines.append(f"  deadlock: await cycle: {ring}")
        ids = {t["id"] for t in group}
        children: dict = {}
        for t in group:
            parent = t.get("parent") if t.get("parent") in ids else None
            children.setdefault(parent, []).append(t)
        shown: set = set()
        # Roots first; then the tasks no root leads to (an await cycle and the tasks under it), cycle
        # members first: every task of the loop is listed, once.
        starts = sorted(children.get(None, []), key=lambda k: k["name"])
        starts += sorted(
            (t for t in group if t.get("parent") in ids), key=lambda k: (k["id"] not in in_cycle, k["name"], k["id"])
        )
        for root in starts:
            if root["id"] not in shown:
                _walk(root, children, names, in_cycle, shown, lines)
    errors = tasks.get("errors", {})
    dropped = errors.get("torn_dropped", 0) + errors.get("unreadable", 0)
    if dropped:
        lines.append("")
        lines.append(
            f"({dropped} task(s) changed while read and were left out; {errors.get('changed', 0)} started or ended during the dump)"
        )
    return "\n".join(lines) + "\n"


def _walk(root: dict, children: dict, names: dict, in_cycle: set, shown: set, lines: list) -> None:
    """``root`` and the tasks under it, each once (a task met again, in an await cycle, is named and
    not followed); iterative, so that a long chain of awaits cannot exhaust Python's recursion."""
    work = [(root, "", True, 0)]
    while work:
        task, prefix, last, depth = work.pop()
        branch = "" if depth == 0 else ("└─ " if last else "├─ ")
        if task["id"] in shown:
            lines.append(f"  {prefix}{branch}↻ {visible(task['name'])} 0x{task['id']:x} (await cycle: listed above)")
            continue
        shown.add(task["id"])
        lines.append(f"  {prefix}{branch}{_task_line(task, names, in_cycle)}")
        inner = prefix + ("" if depth == 0 else ("   " if last else "│  "))
        kids = sorted(children.get(task["id"], []), key=lambda k: k["name"])
        bar = "│  " if kids else "   "
        for function, file, line in task["stack"]:
            lines.append(f"  {inner}{bar}    {visible(function)} ({visible(file)}:{line})")
        for i in range(len(kids) - 1, -1, -1):
            work.append((kids[i], inner, i == len(kids) - 1, depth + 1))


def tasks_report(tasks: dict) -> dict:
    """The `asyncio` object of the JSON dump."""
    cycles, in_cycle = await_cycles.find(tasks["tasks"])
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
                "waits_for": list(t.get("waits_for") or ()),
                "in_cycle": t["id"] in in_cycle,
                "awaiting": t["awaiting"],
                "stack": [{"function": f, "file": file, "line": line} for f, file, line in t["stack"]],
            }
            for t in tasks["tasks"]
        ],
        "cycles": cycles,
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
