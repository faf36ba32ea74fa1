"""CI gates: `--fail-if 'waiting_gil>0.2'` turns a recording into a pass or a failure that names
the thread (or process) over the limit.

An expression is ``[SCOPE:]METRIC OP NUMBER``:
- METRIC of a thread (a share of its samples): ``holding_gil`` (``hold``; GC included), ``waiting_gil``
  (``wait``), ``gc``, ``native``, ``idle``, ``unknown``. Checked for every thread unless SCOPE is
  ``thread=GLOB`` (thread names, fnmatch-style).
- METRIC of a process: ``gil_utilisation`` (``gil``), ``gc_share``, ``mean_waiting_threads``. Checked
  for every process (SCOPE ``process`` may be written).
- OP is one of ``>``, ``>=``, ``<``, ``<=``: the gate *fails* when it holds.
"""

from __future__ import annotations

import fnmatch
import operator
import re
from dataclasses import dataclass, field
from typing import Optional

from gilty._errors import UsageError

THREAD_METRICS = {
    "holding_gil": "holding_gil",
    "hold": "holding_gil",
    "waiting_gil": "waiting_gil",
    "wait": "waiting_gil",
    "gc": "gc",
    "native": "native",
    "idle": "idle",
    "unknown": "unknown",
    "cpu_wait": "cpu_wait",
}
PROCESS_METRICS = {
    "gil_utilisation": "gil_utilisation",
    "gil": "gil_utilisation",
    "gc_share": "gc_share",
    "mean_waiting_threads": "mean_waiting_threads",
}
OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_EXPR = re.compile(
    r"^\s*(?:(?P<scope>process|thread=[^:]+)\s*:\s*)?(?P<metric>[a-z_]+)\s*(?P<op>>=|<=|>|<)\s*(?P<value>[0-9.]+%?)\s*$"
)


@dataclass
class Gate:
    text: str
    metric: str
    op: str
    limit: float
    thread_glob: Optional[str] = None  # None: every thread (thread metrics)

    @property
    def per_thread(self) -> bool:
        return self.metric in THREAD_METRICS.values()


@dataclass
class GateResult:
    gate: Gate
    failures: list = field(default_factory=list)  # [{"pid", "tid", "thread", "value"}]

    @property
    def passed(self) -> bool:
        return not self.failures


def parse_gate(text: str) -> Gate:
    m = _EXPR.match(text)
    if m is None:
        raise UsageError(
            f"--fail-if {text!r}: expected e.g. 'waiting_gil>0.2', 'thread=worker-*:wait>=0.3' or 'gil_utilisation>0.9'"
        )
    name, scope = m.group("metric"), m.group("scope")
    value_text = m.group("value")
    try:
        limit = float(value_text.rstrip("%")) / (100.0 if value_text.endswith("%") else 1.0)
    except ValueError:
        raise UsageError(f"--fail-if {text!r}: {value_text!r} is not a number") from None
    if name in THREAD_METRICS:
        if scope == "process":
            raise UsageError(f"--fail-if {text!r}: {name} is a thread's share; use thread=NAME: or no scope")
        glob = scope.split("=", 1)[1].strip() if scope else None
        return Gate(text.strip(), THREAD_METRICS[name], m.group("op"), limit, glob)
    if name in PROCESS_METRICS:
        if scope and scope != "process":
            raise UsageError(f"--fail-if {text!r}: {name} is a process figure; it takes no thread scope")
        return Gate(text.strip(), PROCESS_METRICS[name], m.group("op"), limit)
    known = ", ".join(sorted(set(THREAD_METRICS) | set(PROCESS_METRICS)))
    raise UsageError(f"--fail-if {text!r}: unknown metric {name!r} (known: {known})")


def evaluate(gates: list, summaries: list) -> list:
    """[GateResult] for ``gates`` over ``summaries`` ([(pid, Summary)], one per process)."""
    results = []
    for gate in gates:
        check = OPS[gate.op]
        result = GateResult(gate)
        for pid, summary in summaries:
            if gate.per_thread:
                for t in summary.threads:
                    if gate.thread_glob is not None and not fnmatch.fnmatchcase(t.name, gate.thread_glob):
                        continue
                    states = t.states.fractions()
                    value = states["holding_gil"] + states["gc"] if gate.metric == "holding_gil" else states[gate.metric]
                    if check(value, gate.limit):
                        result.failures.append({"pid": pid, "tid": t.tid, "thread": t.name, "value": value})
            else:
                value = getattr(summary, gate.metric)
                if check(value, gate.limit):
                    result.failures.append({"pid": pid, "tid": None, "thread": None, "value": value})
        result.failures.sort(key=lambda f: -f["value"] if gate.op.startswith(">") else f["value"])
        results.append(result)
    return results


def describe_failure(result: GateResult) -> str:
    """One line: the gate and the worst thread or process over it."""
    worst = result.failures[0]
    who = (
        f"thread {worst['thread']!r} (tid {worst['tid']}, pid {worst['pid']})"
        if worst["thread"] is not None
        else f"pid {worst['pid']}"
    )
    more = f" and {len(result.failures) - 1} more" if len(result.failures) > 1 else ""
    return f"gate failed: {result.gate.text}: {who} at {worst['value']:.3f}{more}"


def as_json(results: list) -> list:
    return [
        {
            "expr": r.gate.text,
            "passed": r.passed,
            "failures": [dict(f, value=round(f["value"], 6)) for f in r.failures],
        }
        for r in results
    ]
