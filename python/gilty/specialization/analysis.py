"""From a ``SpecializationSession`` to per-site, per-function and per-family findings and a verdict.

Pure functions over the session. The miss estimate works from the reads of each site taken every
``read_interval`` while it runs (time-weighted, like the samples):

- a read that finds the generic path in place (backoff, warming, 3.11 ``*_ADAPTIVE``) stands for
  executions that run it;
- among reads that find a specialization, the share of each distinct specialization (opcode plus
  cache contents: the cached type/keys versions) estimates how often the site re-specializes to each.
  A 3.12+ site re-specializes for the object that causes its 53rd miss, so with receivers of kinds k
  in proportion p_k it holds specialization k about p_k of the time and misses 1 - sum(p_k^2) of its
  executions (two classes alternating: 0.5; a 90/10 mix: 0.18, which is the true rate measured
  in-process, not 0.10).

On 3.11 a missing site instead cycles (ceval.c ``miss:``, specialize.c): each miss decrements the
counter from 53; the 53rd writes ``*_ADAPTIVE`` with ``adaptive_counter_start()`` (value 31), which
counts 31 deferred generic executions down to 0, and the 32nd adaptive execution specializes again
(for its own receiver, so it succeeds). A cycle of L executions thus leaves the site adaptive after
exactly A = 31 + 1 = 32 of them (the deopting miss and the 31 deferred ones) and runs the slow path in
exactly A + 53 = 85 (53 misses, 31 deferred, 1 specializing). With f the share of reads found
adaptive (f = A / L), the slow share is f (A + 53) / A and the miss rate while specialized
m = 53 / (L - A) = 53 f / (A (1 - f)). (Using 31 for A, as this module did first, overstates both.)
Reads are taken in time, not per execution: the generic path takes longer than a hit, so a site read
while its code runs is found adaptive more often than it executes adaptive. A read taken while no
running thread stands in the site's code object finds the state its last execution left, which
weighs the states per call boundary instead; so f comes from those reads ("at rest") when there
are enough of them (docs/specialization.md#miss-estimate). Reads at call boundaries of a site fed a
fixed pattern in calls of a fixed length (three classes in turn in calls of 60: cycle 111) meet only
every s-th execution of the cycle; the adaptive counter values they saw show it, and
``aliasing_factor`` puts f back on the whole adaptive run.

The counter adds what the reads between two re-specializations show: misses counted from its
decrements (a lower bound) and misses since the last specialization.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from gilty.specialization.session import ProcessWatch, SpecializationSession

# Below this many reads a site's estimate is not given (too few to say anything).
MIN_READS = 10
# 3.11: the adaptive share is taken from the reads at rest when there are at least this many of them
# and they are at least this share of all reads (else from all reads).
MIN_REST_READS = 100
MIN_REST_SHARE = 0.3
# 3.11: reads at rest that found the site adaptive, at least, before the counter values they saw are
# taken to show aliasing: unaliased, this many reads meet ~28 of the 32 values of the adaptive run.
MIN_ALIASING_READS = 64
# ... and the share of those reads that may fall off the lattice of an aliased pattern.
OFF_LATTICE_SHARE = 0.1
# A specialized site whose estimated misses reach this share is "missing while specialized".
MISSING_THRESHOLD = 0.05
# Attribute families whose specializations key on the receiver's type.
# BINARY_OP operators with a specialized form in 3.11-3.13 (BINARY_OP_ADD_INT, ..._INPLACE_ADD_UNICODE).
SPECIALIZED_OPERATORS = {"+", "-", "*", "+=", "-=", "*="}
ATTRIBUTE_FAMILIES = {"LOAD_ATTR", "STORE_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR"}
# Call instructions: a sample whose innermost Python frame stands at one is inside the called C
# function (a Python callee would be the innermost frame itself), so its time is the callee's own
# work, not the instruction's; specializing the call saves only the call's overhead. They are shown
# apart and never ranked as slow sites.
CALL_FAMILIES = {"CALL", "PRECALL", "CALL_KW", "CALL_FUNCTION_EX"}  # CALL_KW 3.14+, CALL_FUNCTION_EX 3.15+
# Specialized calls of Python functions: the callee gets a frame of its own, so a sample at the call
# is the call's own dispatch and counts as the instruction's time.
PYTHON_CALLEE_FORMS = {
    "CALL_PY_EXACT_ARGS",
    "CALL_PY_WITH_DEFAULTS",
    "CALL_PY_GENERAL",
    "CALL_BOUND_METHOD_EXACT_ARGS",
    "CALL_BOUND_METHOD_GENERAL",
    "CALL_ALLOC_AND_ENTER_INIT",
    "CALL_KW_PY",
    "CALL_KW_BOUND_METHOD",
    "CALL_EX_PY",
}


@dataclass
class Site:
    pid: int
    python_version: str
    qualname: str
    filename: str
    line: Optional[int]
    offset: int
    family: str
    name: str
    form: str
    counter: Optional[int]
    counter_meaning: str
    samples: int
    share: float  # of the process's running samples
    reads: int
    specialized_share: Optional[float]
    miss_estimate: Optional[float]  # among specialized executions
    slow_path_estimate: Optional[float]  # generic + missing executions, of all executions
    specializations: int
    counted_misses: int
    changes: int
    misses_since_specialized: Optional[int]
    operator: Optional[str] = None
    names_seen: dict = field(default_factory=dict)
    cause: str = ""
    source: str = ""
    source_not_shown: str = ""  # why source is empty: the file was refused (docs/specialization.md#source-lines)

    @property
    def missing_while_specialized(self) -> bool:
        """Specialized for much of the time (by name), yet missing (3.11: de-specializing and back)."""
        return (self.specialized_share or 0) >= 0.2 and (self.miss_estimate or 0) >= MISSING_THRESHOLD

    @property
    def in_backoff(self) -> bool:
        return self.form == "backoff"

    @property
    def is_call(self) -> bool:
        """A call whose samples are its (C) callee's: not one specialized for a Python callee."""
        return self.family in CALL_FAMILIES and self.name not in PYTHON_CALLEE_FORMS

    @property
    def own_samples(self) -> int:
        """Samples spent in the instruction itself (a call's samples are its callee's)."""
        return 0 if self.is_call else self.samples

    @property
    def cost(self) -> float:
        """Samples spent on the slow path in the instruction itself (the ranking key of the verdict)."""
        return self.own_samples * (self.slow_path_estimate or 0.0)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(
            missing_while_specialized=self.missing_while_specialized,
            in_backoff=self.in_backoff,
            cost=self.cost,
            is_call=self.is_call,
            own_samples=self.own_samples,
        )
        return d


def counter_meaning(ins: dict, minor: tuple, rules: dict) -> str:
    form, value, backoff = ins["form"], ins["counter_value"], ins["backoff"]
    if form == "specialized":
        since = ins["misses_since_specialized"]
        if minor == (3, 11):
            return f"{since} misses since specialized; back to adaptive after {value} more"
        return f"{since} misses since (re)specialized; re-specializes after {value + 1} more misses"
    if form == "warming":
        if minor == (3, 11):
            return (
                "quickened; tries to specialize on its next execution"
                if value == 0
                else f"tries to specialize in {value} executions"
            )
        return "executed once; specializes on its next execution"
    if form == "backoff":
        if backoff == 0 and minor >= (3, 14):
            # specialize.c (3.14+): an attribute neither the class nor the instance has gets the
            # cooldown count on the generic opcode instead of a backoff.
            every = rules.get("specialized_start", 52)  # measured: the attempt itself counts down once
            return f"generic path; next specialization attempt in {value} executions (retried every {every}, no backoff)"
        return f"generic path; next specialization attempt in {value} executions (backoff exponent {backoff})"
    if form == "cold":
        if minor == (3, 11):
            delay = rules.get("quickening_warmup_delay") or 8
            return f"code object not quickened yet (fewer than {delay} calls or loop iterations)"
        return "not executed yet, or just failed to re-specialize"
    if form == "generic":
        return "counter disabled: stays generic"
    return "opcode replaced by instrumentation (sys.monitoring or a tracer)"


def likely_cause(site: Site, minor: tuple) -> str:
    fam = site.family
    flapping = site.specialized_share is not None and 0.0 < site.specialized_share < 1.0
    poly = site.specializations > 1 or flapping
    if fam in ATTRIBUTE_FAMILIES:
        if site.specializations > 4:
            return "the receiver's class keeps changing (modified at run time) or many receiver types reach this site"
        if poly or site.missing_while_specialized:
            return "several receiver types at this site: it keeps re-specializing for the latest one"
        if site.form in ("backoff", "warming") or site.slow_path_estimate:
            if fam == "STORE_ATTR":
                return (
                    "attribute store that cannot be specialized (to a class or module, a property or other "
                    "descriptor, __setattr__, or an instance without inline values or slots)"
                )
            kinds = "__getattr__/__getattribute__, a property, a class attribute read through an instance, or another descriptor"
            if minor >= (3, 12):
                kinds = "__getattr__ fallback, a class attribute or descriptor without a specialization, or a type without a version tag"
            if minor >= (3, 13):
                # typeobject.c: a class modified more than MAX_VERSIONS_PER_CLASS times gets no version again.
                kinds += " (a class modified at run time over 1,000 times is never versioned again)"
            return f"attribute lookup that cannot be specialized ({kinds})"
    if fam == "LOAD_GLOBAL" and (site.changes or site.counted_misses):
        return (
            "the module globals or builtins keep changing keys (a global added or deleted at run time); rebinding alone does not"
        )
    if fam == "BINARY_OP" and site.operator and minor >= (3, 14) and site.slow_path_estimate:
        # 3.14 folded subscripts into BINARY_OP and added BINARY_OP_EXTEND (mixed int/float, int bitwise).
        return (
            f"operator `{site.operator}` on operand types without a specialization (3.14+ specialize + - * on "
            f"int/float, + on str, [] on list/tuple/str/dict and some mixed int/float and int bitwise forms)"
        )
    if fam == "BINARY_OP" and site.operator and site.operator not in SPECIALIZED_OPERATORS:
        return f"operator `{site.operator}` has no specialization (CPython 3.11-3.13 specialize only +, - and * on int/float, + on str)"
    if fam in ("BINARY_OP", "COMPARE_OP"):
        return "mixed operand types (int with float, or types without a specialization)"
    if fam in ("BINARY_SUBSCR", "STORE_SUBSCR"):
        return "container or index types without a specialization (a dict/list subclass, slices, negative indexes)"
    if fam in ("CALL", "PRECALL"):
        return "callables of several kinds, or a kind without a specialization (keywords, *args, C functions with keywords)"
    if fam == "FOR_ITER":
        return "iterating something other than a list, tuple, range or generator"
    if fam == "UNPACK_SEQUENCE":
        return "unpacking something other than a list or tuple of the expected length"
    if poly:
        return "several operand types at this site"
    return "no specialization applies to the values seen here"


def _source_line(watch: ProcessWatch, filename: str, line: Optional[int]) -> tuple:
    """(the line's text, why the file's source is not shown): from the session, never from a file."""
    src = watch.source(filename)
    text = str((src.get("lines") or {}).get(str(line), "")).strip() if line else ""
    return text, str(src.get("not_shown") or "")


def aliasing_factor(values: Optional[dict], adaptive_run: int) -> float:
    """3.11: how much the reads at rest over-weigh the adaptive executions they met.

    Each counter value of the adaptive run (31 down to 0) marks one of its ``adaptive_run``
    executions. Reads at call boundaries of a target that feeds the site a fixed pattern in calls of
    a fixed length meet the cycle only every s-th execution (s shares a factor of the call length and
    the cycle): they then see adaptive values s apart, each standing for s executions, and the
    d values seen stand for d * s executions of the run, not all of them. Scaling the adaptive share
    by adaptive_run / (d * s) puts it back on the whole run. A few reads off the lattice are allowed
    and left out: they were taken inside a call (entered after the sampling pass, or preempted in it
    on a loaded machine, so not seen running) and lean towards the slower adaptive executions. Applied only when the reads found
    the site adaptive often enough (MIN_ALIASING_READS) that a lattice cannot come from chance.
    """
    generic = sum((values or {}).values())
    run = {int(v): n for v, n in (values or {}).items() if n and int(v) < adaptive_run}
    total = sum(run.values())
    if len(run) < 2 or total < MIN_ALIASING_READS:
        return 1.0
    for stride in range(adaptive_run // 2, 1, -1):  # the widest lattice that holds the reads
        for residue in range(stride):
            on = [v for v in run if v % stride == residue]
            on_reads = sum(run[v] for v in on)
            if on_reads >= (1.0 - OFF_LATTICE_SHARE) * total:
                # The reads off the lattice are left out too: they landed inside a call (time-weighted).
                return adaptive_run / (len(on) * stride) * (generic - total + on_reads) / generic
    return 1.0


def _estimates(spec_share: float, specs: list, minor: tuple, rules: dict, history: Optional[dict] = None) -> tuple:
    """(miss rate while specialized, share of executions on the slow path) from a site's reads."""
    spec_reads = sum(specs)
    if not spec_reads:
        return None, 1.0
    adaptive_start = rules.get("adaptive_start")
    if minor == (3, 11) and spec_share < 1.0 and adaptive_start:
        f = 1.0 - spec_share
        h = history or {}
        rest = h.get("rest_reads", 0)
        # Executions per cycle that leave the site adaptive: the deopting miss and the deferred ones.
        adaptive_run = (adaptive_start >> rules.get("value_shift", 4)) + 1
        if rest >= MIN_REST_READS and rest >= MIN_REST_SHARE * h.get("reads", 0):
            f = (1.0 - h.get("rest_specialized", 0) / rest) * aliasing_factor(h.get("rest_generic_values"), adaptive_run)
        misses = rules.get("specialized_start", 53)
        slow = min(1.0, f * (adaptive_run + misses) / adaptive_run)
        miss = min(1.0, misses * f / (adaptive_run * (1.0 - f))) if f < 1.0 else 1.0
        return miss, slow
    miss = 1.0 - sum((n / spec_reads) ** 2 for n in specs)
    return miss, (1.0 - spec_share) + spec_share * miss


def sites_of(watch: ProcessWatch) -> list:
    """Every specializable instruction of every followed code object, with its estimates."""
    raw = watch.raw
    minor = watch.minor
    rules = raw.get("counter_rules", {})
    running = max(raw["running_samples"], 1)
    out = []
    for code in raw["codes"]:
        for ins in code["instructions"]:
            if not ins["family"] or ins["form"] is None:
                continue
            h = ins.get("history") or {}
            reads = h.get("reads", 0)
            specs = h.get("specializations", [])
            spec_reads = sum(specs)
            spec_share = miss = slow = None
            if reads >= MIN_READS:
                spec_share = spec_reads / reads
                miss, slow = _estimates(spec_share, specs, minor, rules, h)
            site = Site(
                pid=watch.pid,
                python_version=watch.python_version,
                qualname=code["qualname"],
                filename=code["filename"],
                line=ins["line"],
                offset=ins["offset"],
                family=ins["family"],
                name=ins["name"],
                form=ins["form"],
                counter=ins["counter"],
                counter_meaning=counter_meaning(ins, minor, rules),
                samples=ins.get("samples", 0),
                share=ins.get("samples", 0) / running,
                reads=reads,
                specialized_share=spec_share,
                miss_estimate=miss,
                slow_path_estimate=slow,
                specializations=len(specs),
                counted_misses=h.get("counted_misses", 0),
                changes=h.get("changes", 0),
                misses_since_specialized=ins["misses_since_specialized"],
                names_seen=h.get("names", {}),
                operator=ins.get("operator"),
            )
            site.cause = likely_cause(site, minor) if (slow or site.form in ("backoff",)) else ""
            site.source, site.source_not_shown = _source_line(watch, site.filename, site.line)
            out.append(site)
    return out


@dataclass
class Group:
    """Sites of one function or one family, summed the way the seed's opcache table was."""

    key: str
    sites: int = 0
    samples: int = 0
    specialized_samples: float = 0.0  # samples weighted by the share of reads found specialized
    slow_samples: float = 0.0
    missing: int = 0
    backoff: int = 0
    cold: int = 0
    specialized_now: int = 0

    @property
    def specialized_share(self) -> Optional[float]:
        return self.specialized_samples / self.samples if self.samples else None

    @property
    def slow_share(self) -> Optional[float]:
        return self.slow_samples / self.samples if self.samples else None

    def add(self, s: Site) -> None:
        self.sites += 1
        self.samples += s.samples
        spec = s.specialized_share if s.specialized_share is not None else (1.0 if s.form == "specialized" else 0.0)
        self.specialized_samples += s.samples * spec
        self.slow_samples += s.cost
        self.missing += s.missing_while_specialized
        self.backoff += s.in_backoff
        self.cold += s.form == "cold"
        self.specialized_now += s.form == "specialized"

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(specialized_share=self.specialized_share, slow_share=self.slow_share)
        return d


def _same_site_groups(sites: list) -> list:
    """Costly sites, one group per source site across processes (a server's workers run the same
    code), costliest group first."""
    groups: dict = {}
    for s in sites:
        if s.cost > 0:
            groups.setdefault((s.filename, s.qualname, s.offset), []).append(s)
    return sorted(groups.values(), key=lambda g: (-sum(s.cost for s in g), g[0].qualname, g[0].offset))


def _verdict_line(group: list, total_running: int) -> str:
    s = max(group, key=lambda x: x.samples)
    samples = sum(x.own_samples for x in group)
    cost = sum(x.cost for x in group)
    slow = cost / samples if samples else s.slow_path_estimate or 0.0
    what = f"misses ~{slow:.0%} of its executions" if s.form == "specialized" else f"runs the generic path ({s.form})"
    where = f"{len(group)} processes" if len(group) > 1 else "here"
    line = (
        f"{os.path.basename(s.filename)}:{s.line} {s.qualname}: {s.name} {what}, "
        f"{samples / total_running:.1%} of the time spent running Python {where}"
    )
    line += f" — `{s.source}`" if s.source else f" (source not shown: {s.source_not_shown})" if s.source_not_shown else ""
    line += f"; likely cause: {s.cause}"
    return line


def _generic_calls(sites: list, total_running: int, top: int) -> list:
    """Call sites on the generic path, by time: one short line each. Their time is the called C
    function's own work, so they are listed apart from the verdict, not ranked in it."""
    groups: dict = {}
    for s in sites:
        if s.is_call and s.samples and (s.slow_path_estimate or s.form == "backoff"):
            groups.setdefault((s.filename, s.qualname, s.offset), []).append(s)
    ordered = sorted(groups.values(), key=lambda g: (-sum(x.samples for x in g), g[0].qualname, g[0].offset))
    out = []
    for g in ordered[:top]:
        s = max(g, key=lambda x: x.samples)
        source = f" `{s.source}`" if s.source else f" (source not shown: {s.source_not_shown})" if s.source_not_shown else ""
        out.append(
            f"{os.path.basename(s.filename)}:{s.line} {s.qualname}:{source} {s.name} ({s.form}), "
            f"{sum(x.samples for x in g) / total_running:.1%} in the callee"
        )
    return out


@dataclass
class Analysis:
    sites: list  # every site, costliest first
    functions: list  # Group per (pid, qualname, file), by samples
    families: list  # Group per family, by samples
    verdict: list  # one line per costly site
    notes: list
    # No thread ran Python (holding the GIL, on a CPU) in any process: nothing can be judged.
    nothing_ran: bool = False
    # Generic call sites, apart: their time is the callee's (see CALL_FAMILIES).
    generic_calls: list = field(default_factory=list)
    running_samples: int = 0


def analyse(session: SpecializationSession, top: int = 10) -> Analysis:
    sites = [s for w in session.processes for s in sites_of(w)]
    running = sum(w.raw["running_samples"] for w in session.processes)
    total_running = max(running, 1)
    sites.sort(key=lambda s: (-s.cost, -s.samples, s.qualname, s.offset))
    functions: dict = {}
    families: dict = {}
    for s in sites:
        key = f"{s.qualname} ({os.path.basename(s.filename)})" + (f" [pid {s.pid}]" if len(session.processes) > 1 else "")
        functions.setdefault(key, Group(key)).add(s)
        families.setdefault(s.family, Group(s.family)).add(s)
    fn_list = sorted(functions.values(), key=lambda g: (-g.samples, g.key))
    fam_list = sorted(families.values(), key=lambda g: (-g.samples, g.key))
    verdict = [_verdict_line(group, total_running) for group in _same_site_groups(sites)[:top]]
    notes = []
    for w in session.processes:
        raw = w.raw
        if raw["running_samples"] == 0 and len(session.processes) > 1:
            notes.append(f"pid {w.pid}: nothing ran (no thread ran Python code holding the GIL)")
        if w.minor == (3, 11):
            notes.append(
                f"pid {w.pid}: Python 3.11 de-specializes after 53 misses (*_ADAPTIVE), so missing sites show as adaptive rather than specialized"
            )
    refused = {(s.filename, s.source_not_shown) for s in sites if s.source_not_shown and s.samples}
    notes += [f"source not shown for {name}: {why}" for name, why in sorted(refused)[:top]]
    return Analysis(
        sites,
        fn_list,
        fam_list,
        verdict,
        notes,
        nothing_ran=running == 0,
        generic_calls=_generic_calls(sites, total_running, top),
        running_samples=running,
    )


def nothing_ran_line(session: SpecializationSession) -> str:
    """The verdict when no thread ran Python: said plainly, never "the hot sites stay specialized"."""
    seconds = max((w.raw["elapsed_s"] for w in session.processes), default=0.0)
    threads = sum(w.raw["thread_samples"] for w in session.processes)
    without = sum(w.raw.get("without_gil_samples", 0) for w in session.processes)
    return (
        f"nothing ran: in {seconds:.1f} s no thread ran Python code ({threads} thread samples: idle, blocked, "
        f"or {without} on a CPU without the GIL), so there is nothing to say about specialization"
    )
