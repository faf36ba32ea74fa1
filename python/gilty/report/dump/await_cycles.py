"""Await cycles among asyncio tasks: tasks that wait on each other, or on themselves, for good (a
deadlock). A task waits for the tasks in its ``waits_for`` (the task it awaits, the tasks of the gather
it awaits) and for its children (the tasks whose ``parent`` it is: awaited through a TaskGroup, shield,
wait_for...). Every walk here is iterative and visits a task once, so stale or torn edges, which can
form cycles of their own, cannot make it loop or recurse deeply."""

from __future__ import annotations

# Cycles named per snapshot; every task of a cycle is flagged `in_cycle` whatever their number.
MAX_CYCLES = 100


def _edges(tasks: list) -> dict:
    ids = {t["id"] for t in tasks}
    out: dict = {i: set() for i in ids}
    for t in tasks:
        for w in t.get("waits_for") or ():
            if w in ids:
                out[t["id"]].add(w)
        p = t.get("parent")
        if p in ids:
            out[p].add(t["id"])
    return {i: sorted(e) for i, e in out.items()}


def _components(edges: dict) -> list:
    """Strongly connected components (Tarjan's, with an explicit stack)."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    found = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            succ = edges[node]
            if i < len(succ):
                work.append((node, i + 1))
                nxt = succ[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                found.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def _cycle_through(start: int, members: set, edges: dict) -> list:
    """The shortest cycle from ``start`` back to it inside one component, as [start, ..., last]."""
    came_from = {start: None}
    queue = [start]
    for node in queue:
        for nxt in edges[node]:
            if nxt == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return path[::-1]
            if nxt in members and nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    return [start]


def find(tasks: list) -> tuple:
    """(cycles, in_cycle): each cycle a list of task ids, each waiting for the next and the last for
    the first (at most ``MAX_CYCLES``, together covering every task in a cycle up to that number); and
    the set of ids of every task in a cycle."""
    edges = _edges(tasks)
    cycles = []
    in_cycle: set = set()
    for comp in _components(edges):
        if len(comp) == 1 and comp[0] not in edges[comp[0]]:
            continue
        members = set(comp)
        in_cycle |= members
        covered: set = set()
        for start in sorted(members):
            if start in covered or len(cycles) >= MAX_CYCLES:
                continue
            cycle = _cycle_through(start, members, edges)
            covered.update(cycle)
            cycles.append(cycle)
    cycles.sort()
    return cycles, in_cycle
