"""The server's side of a load step: its processes sampled on the same clock while the step runs,
summarised as what the workers did (GIL held, waited for, native, idle, GC), where (function and
caller), and what limits the server at the knee."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from gilty.load import endpoints, eventloop, kinds, task_endpoints
from gilty.load.sites import NO_APP, AppScope, is_library, library_prefixes, site_key
from gilty.load.startup import startup_frame, startup_label
from gilty.observe.monitor.memory_self import memory_self
from gilty.sampling import capture, processes
from gilty.sampling.aggregate import ABSENT
from gilty.sampling.analysis.saturation import THROTTLED_NOTABLE, saturation
from gilty.sampling.analysis.states import gc_share, gil_utilisation, mean_waiting_threads
from gilty.sampling.recorded_sources import SourceKeeper
from gilty.sampling.session import CPU_WAIT, GC, HOLDING_GIL, NATIVE, NO_STACK, STATE_NAMES, UNKNOWN, Recording

PROFILE_RATE_HZ = 200.0
TOP_SITES = 5


@dataclass
class Site:
    function: str
    file: str
    line: int
    caller: Optional[str]  # "function (file:line)" of the calling frame
    share: float  # of the busy processes' sampling passes in which a thread held the GIL here


@dataclass
class StepProfile:
    processes: int
    busy_processes: int  # the busiest workers (working at least half as much as the busiest one), whose states name the cause
    gil_utilisation: float  # mean over the busy processes
    gc_share: float
    mean_waiting_threads: float
    states: dict  # state name -> share of the busy processes' request-handling threads' samples (start-up left out)
    idle_kinds: dict  # idle kind -> share of the same samples ("waiting for work", "I/O wait in a request", "sleep", ...)
    sites: list = field(default_factory=list)  # [Site], the busiest first (GIL held)
    endpoints: list = field(default_factory=list)  # [endpoints.Endpoint], most server time first
    loops: list = field(default_factory=list)  # [eventloop.LoopLag], the most lagging first
    rate_hz: float = PROFILE_RATE_HZ  # of the sampling, so a reader can turn seconds back into samples
    memory: list = field(default_factory=list)  # [{"pid", "rss", "pss", "uss"}] bytes, read as the step ended
    background: list = field(default_factory=list)  # [endpoints.BackgroundThread]: GIL held outside requests
    native_sites: list = field(default_factory=list)  # [Site] where the busy processes ran native code without the GIL
    startup_share: float = 0.0  # of every working thread's samples (all processes): importing, compiling, making classes
    startup_sites: list = field(default_factory=list)  # ["FileLoader.get_data (importlib)", ...], the most seen first
    # With --tasks: [task_endpoints.TaskEndpoint], per endpoint where its requests' tasks spent their time
    task_endpoints: list = field(default_factory=list)
    # Of the busy processes' sampling passes, those in which none of their working threads did anything
    # but wait for work: the process had no request in progress (a share of time, not of thread samples,
    # so a thread per idle keep-alive connection does not outweigh the one serving).
    waiting_for_work_passes: float = 0.0
    # Of the passes in which they had a request in progress, those in which a working thread was runnable
    # without a CPU and none ran on one: the time the host (or the cgroup's quota) held the work back.
    cpu_starved_passes: float = 0.0
    # CPU supply, from the kernel (None when not known): the busy processes' threads' run-queue delay
    # (ms per s), their cgroup's throttled share of periods, the CPUs the busiest processes may run on
    # (affinity and cpuset), the host's CPUs, and the CPUs all the server's processes used.
    run_delay_ms_per_s: Optional[float] = None
    cgroup_throttled_share: Optional[float] = None
    cpus_allowed: Optional[int] = None
    host_cpus: Optional[int] = None
    cpus_used: Optional[float] = None
    # Of the time, the share in which the GIL's holder was itself runnable without a CPU (part of
    # gil_utilisation: a holder held off its CPU still holds the GIL)
    holder_cpu_wait: float = 0.0


# A process is one of the busiest when it worked (did anything but wait for work) at least this
# share of what the busiest one did: idle workers must not dilute the states that name the cause.
BUSIEST_SHARE = 0.5
IDLE_THREAD_SHARE = 0.98  # a thread idle or waiting for work this much of its samples is a parked pool thread


def _tally(s, prefixes: tuple, app: AppScope) -> tuple:
    """({tid: {category: samples}}, {(state, stack_id, syscall): category}) over a session's runs."""
    cache: dict = {}
    per_thread: dict = {}
    for tid, _first, passes, state, stack_id, nr in s.iter_runs():
        if state == ABSENT:  # passes in which the thread was not seen
            continue
        category = kinds.classify(s, state, stack_id, nr, prefixes, app, cache)
        bucket = per_thread.setdefault(tid, {})
        bucket[category] = bucket.get(category, 0) + passes
    return per_thread, cache


def _working_tids(per_thread: dict, keep_parked: bool = False) -> set:
    """The threads that did something (not parked all along, unless ``keep_parked``)."""
    out = set()
    for tid, counts in per_thread.items():
        total = sum(counts.values())
        resting = sum(n for c, n in counts.items() if _is_idle_kind(c))
        if total and (keep_parked or resting < IDLE_THREAD_SHARE * total):
            out.add(tid)
    return out


def _working_threads(per_thread: dict, keep_parked: bool = False) -> dict:
    """{category: samples} summed over the threads that did something (not parked all along, unless
    ``keep_parked``)."""
    out: dict = {}
    for tid in _working_tids(per_thread, keep_parked):
        for c, n in per_thread[tid].items():
            out[c] = out.get(c, 0) + n
    return out


_ON_CPU = (HOLDING_GIL, GC, NATIVE, UNKNOWN)  # states given only to a thread not known to be off its CPU


def _pass_counts(s, tids: set, prefixes: tuple, app: AppScope, cache: dict) -> tuple:
    """(passes in which ``tids`` were seen, those in which every one seen waited for work, those with
    work in which one was runnable without a CPU and none ran on one); start-up samples count as none."""
    seen, busy, running, starved = bytearray(), bytearray(), bytearray(), bytearray()
    for tid, first, passes, state, stack_id, nr in s.iter_runs():
        if state == ABSENT or tid not in tids:
            continue
        category = kinds.classify(s, state, stack_id, nr, prefixes, app, cache)
        if category == kinds.STARTUP:
            continue
        end = first + passes
        if len(seen) < end:
            for flags in (seen, busy, running, starved):
                flags.extend(bytes(end - len(flags)))
        ones = b"\x01" * passes
        seen[first:end] = ones
        if category != kinds.WAITING_FOR_WORK:
            busy[first:end] = ones
        if state in _ON_CPU:
            running[first:end] = ones
        elif state == CPU_WAIT:
            starved[first:end] = ones
    n_seen, n_busy = seen.count(1), busy.count(1)
    held_back = sum(1 for b, r, w in zip(busy, running, starved) if b and w and not r)
    return n_seen, n_seen - n_busy, held_back


def _cpus_allowed(pid: int) -> Optional[int]:
    """How many CPUs the process may run on (its affinity, within its cpuset); None once it is gone."""
    try:
        return len(os.sched_getaffinity(pid))
    except OSError:
        return None


def _cpu_supply(live: list, sessions: list) -> dict:
    """StepProfile's CPU supply fields from the kernel's counters of the step's recording."""
    out: dict = {"host_cpus": os.cpu_count()}
    delays, weights, throttled = 0.0, 0, []
    for s in sessions:
        sat = saturation(s)
        if sat is None:
            continue
        delays += sat.run_delay_ms_per_s * sat.threads
        weights += sat.threads
        if sat.throttled_share is not None:
            throttled.append(sat.throttled_share)
    if weights:
        out["run_delay_ms_per_s"] = delays / weights
    if throttled:
        out["cgroup_throttled_share"] = max(throttled)
    allowed = [n for n in (_cpus_allowed(s.target.pid) for s in sessions) if n is not None]
    if allowed:
        out["cpus_allowed"] = min(allowed)
    used = [
        sum(run for run, _delay in s.sched["threads"].values()) / 1e9 / s.sched["seconds"] for s in live if s.sched.get("seconds")
    ]
    if used:
        out["cpus_used"] = sum(used)
    return out


_STATE_SET = set(STATE_NAMES)


def _is_idle_kind(category: str) -> bool:
    return category not in _STATE_SET and category != kinds.STARTUP


def _busiest(tallies: list) -> list:
    """The sessions whose working threads worked (anything but waiting for work and start-up) at
    least BUSIEST_SHARE of the busiest one's share."""
    work = []
    for s, counts in tallies:
        total = sum(n for c, n in counts.items() if c != kinds.STARTUP)
        worked = total - counts.get(kinds.WAITING_FOR_WORK, 0)
        work.append((worked / total if total else 0.0, s, counts))
    top = max((w for w, _s, _c in work), default=0.0)
    if top <= 0:
        return [(s, c) for _w, s, c in work]
    return [(s, c) for w, s, c in work if w >= BUSIEST_SHARE * top]


def _gil_utilisation_at_work(s) -> float:
    """The share of passes with the GIL held, passes in which it was held by start-up code left out:
    a worker importing its application holds the GIL, but that is not the load's doing."""
    starting = sum(
        n
        for (_tid, state, stack_id), n in s.stack_counts().items()
        if state in (HOLDING_GIL, GC) and stack_id != NO_STACK and startup_frame(s.stack(stack_id))
    )
    if not starting:
        return gil_utilisation(s)
    held = max(0, s.passes_with_gil_held() - starting)
    return held / max(1, s.samples - starting)


def _rank_sites(sites: dict, total: float) -> list:
    ranked = sorted(sites.items(), key=lambda kv: -kv[1])[:TOP_SITES]
    return [Site(f, file, line, caller, n / total) for (f, file, line, caller), n in ranked]


def summarise_step(
    recording: Recording, loop_threshold_s: float = eventloop.DEFAULT_THRESHOLD_S, app: AppScope = NO_APP
) -> Optional[StepProfile]:
    # Helpers (a router in front of the workers, a resource tracker) serve no request of their own.
    live = [s for s in recording.sessions if s.samples and s.target.pid not in recording.helpers]
    if not live:
        return None
    # Endpoints first: the packages of handlers found in site-packages are the application's when
    # the sites are named below.
    table = endpoints.endpoint_table(recording.sessions, app)
    own = app
    for e in table:
        own = endpoints.handler_app((e.function, e.file, 0), own) if e.file else own
    per_session = [(s, *_tally(s, library_prefixes(s), own)) for s in live]
    # Every thread parked all along (a server waiting for work throughout): then they are the picture.
    keep_parked = not any(_working_threads(per_thread) for _s, per_thread, _cache in per_session)
    tallies, startup_sites, startup_n, working_n, for_work = [], {}, 0, 0, {}
    for s, per_thread, cache in per_session:
        counts = _working_threads(per_thread, keep_parked)
        startup_n += counts.get(kinds.STARTUP, 0)
        working_n += sum(counts.values())
        tallies.append((s, counts))
        for_work[id(s)] = _pass_counts(s, _working_tids(per_thread, keep_parked), library_prefixes(s), own, cache)
    for s in live:
        for (_tid, _state, stack_id), n in s.stack_counts().items():
            label = startup_label(s.stack(stack_id)) if stack_id != NO_STACK else None
            if label:
                startup_sites[label] = startup_sites.get(label, 0) + n
    busiest = _busiest(tallies)
    sessions = [s for s, _c in busiest]
    util = sum(_gil_utilisation_at_work(s) for s in sessions) / len(sessions)
    gcs = sum(gc_share(s) for s in sessions) / len(sessions)
    waiting = sum(mean_waiting_threads(s) for s in sessions) / len(sessions)
    counts: dict = {}
    for _s, c in busiest:
        for category, n in c.items():
            if category != kinds.STARTUP:
                counts[category] = counts.get(category, 0) + n
    total = sum(counts.values()) or 1
    idle_total = sum(n for c, n in counts.items() if _is_idle_kind(c))
    states = {name: counts.get(name, 0) / total for name in STATE_NAMES}
    states["idle"] = idle_total / total
    sites: dict = {}
    native: dict = {}
    for s in sessions:
        prefixes = library_prefixes(s)
        for (tid, state, stack_id), n in s.stack_counts().items():
            if state not in (HOLDING_GIL, GC, NATIVE):
                continue
            stack = s.stack(stack_id)
            if not stack or startup_frame(stack):
                continue
            # Pool a library function's lines: `quote` is one site whichever of its lines was sampled.
            function, file, line, caller = site_key(stack, prefixes, own)
            key = (function, file, line if not is_library(file, prefixes, own) else 0, caller)
            into = native if state == NATIVE else sites
            into[key] = into.get(key, 0) + n
    # Shares of the busy processes' sampling passes, or of the samples counted when a pass counted more
    # than one thread here: a share is at most 100 % by construction.
    passes_total = sum(s.samples for s in sessions) or 1
    loops = eventloop.loop_lags(live, loop_threshold_s)
    seen = sum(for_work[id(s)][0] for s in sessions)
    waited = sum(for_work[id(s)][1] for s in sessions)
    held_back = sum(for_work[id(s)][2] for s in sessions)
    return StepProfile(
        processes=len([s for s in recording.sessions if s.target.pid not in recording.helpers]),
        busy_processes=len(sessions),
        gil_utilisation=util,
        gc_share=gcs,
        mean_waiting_threads=waiting,
        states=states,
        idle_kinds={k: n / total for k, n in sorted(counts.items(), key=lambda kv: -kv[1]) if _is_idle_kind(k)},
        sites=_rank_sites(sites, max(passes_total, sum(sites.values()))),
        native_sites=_rank_sites(native, max(passes_total, sum(native.values()))),
        # Every process, not only the busy ones: a worker whose loop is blocked in a sleep holds no GIL.
        endpoints=table,
        loops=loops,
        rate_hz=recording.rate_hz,
        background=endpoints.background_threads(recording.sessions, {(lag.pid, lag.tid) for lag in loops}, own),
        startup_share=startup_n / working_n if working_n else 0.0,
        startup_sites=[label for label, _n in sorted(startup_sites.items(), key=lambda kv: -kv[1])[:3]],
        task_endpoints=task_endpoints.task_endpoint_table(live, own),
        waiting_for_work_passes=waited / seen if seen else 0.0,
        cpu_starved_passes=held_back / (seen - waited) if seen > waited else 0.0,
        holder_cpu_wait=sum(s.passes_holder_cpu_wait() / s.samples for s in sessions) / len(sessions),
        **_cpu_supply(live, sessions),
    )


# A loop away from its selector (in spans over the threshold) this much of the time is the limit: every
# request on that worker waits for those spans whatever else the server could do.
LOOP_LAG_LIMIT_SHARE = 0.3
# Start-up seen in this share of a step's working samples is said beside the cause: the step measured
# workers starting as well as load.
STARTUP_NOTE_SHARE = 0.05


def loop_words(loop: eventloop.LoopLag) -> str:
    top = loop.culprits[0] if loop.culprits else None
    where = ""
    if top is not None:
        where = f"; most of it under `{top.site}`" + (f" called from `{top.caller}`" if top.caller else "") + f", {top.doing}"
    return (
        f"the event loop of pid {loop.pid} ({loop.thread}) did not get back to its selector for {loop.lag_share:.0%} "
        f"of the time in {loop.spans} spans over {loop.threshold_s * 1e3:g} ms (up to {loop.max_span_s * 1e3:.0f} ms){where}"
    )


def _site_words(top: Optional[Site]) -> str:
    if top is None:
        return ""
    place = top.file if top.line == 0 else f"{top.file}:{top.line}"
    where = f", {top.share:.0%} under `{top.function}` ({place})"
    if top.caller:
        where += f" called from `{top.caller}`"
    return where


# An endpoint whose requests' tasks spend this share of their time in one await names that await as
# the cause of a limit that is time spent outside the workers' CPU (waiting for work, concurrency, I/O).
AWAIT_CAUSE_SHARE = 0.5
# Awaits that cap how many requests proceed at once: when the top one is of these kinds, it is the
# limit itself (a semaphore of 2 caps the server however idle its CPU), not a cause of "waiting".
CAPPING_KINDS = ("semaphore", "lock", "condition", "queue")


# The busiest workers had a request in progress at least this share of the requests' time in flight
# (busy share / Little's L): the requests did not queue before reaching them, whatever share of the
# time the workers waited for the next one.
SERVED_NOT_QUEUED = 0.5


def served_share(p: StepProfile, in_flight_mean: float) -> Optional[float]:
    """Of the requests' mean time in flight, the share the busiest workers had one in progress: the
    time a worker has one or more by Little's law is at most L, so 1 means no request waited outside
    a worker and a small share means they queued before reaching one (None without requests in flight)."""
    if in_flight_mean <= 0:
        return None
    return min(1.0, p.busy_processes * (1.0 - p.waiting_for_work_passes) / in_flight_mean)


def limit_from_profile(p: StepProfile, served: Optional[float] = None) -> tuple:
    """(limit name, plain words) for a step past the knee, from what the busiest workers did (start-up
    samples left out; see startup_words for those); with tasks recorded, a limit outside the CPU says
    which await the requests spend their time in. ``served`` (see served_share) keeps a step whose
    requests were worked on all along from reading "waiting for work"."""
    name, words = _limit_from_profile(p, served)
    awaited = [e for e in getattr(p, "task_endpoints", []) if e.awaits and e.awaits[0]["share"] >= AWAIT_CAUSE_SHARE]
    if awaited and name in ("waiting for work", "concurrency", "I/O wait on a dependency"):
        top = max(awaited, key=lambda e: e.task_s * e.awaits[0]["share"])
        kind = top.awaits[0]["kind"]
        if kind in CAPPING_KINDS:
            return (
                f"awaiting a {kind}",
                f"{task_endpoints.await_words(top)}: it lets only so many requests proceed at once ({words})",
            )
        words = f"{words}: {task_endpoints.await_words(top)}"
    return name, words


def _limit_from_profile(p: StepProfile, served: Optional[float] = None) -> tuple:
    n = p.busy_processes
    workers = f"the {n} busiest processes" if n != 1 else "the busiest process"
    verb = (
        (lambda plural: plural)
        if n != 1
        else (lambda plural: {"spend": "spends", "hold": "holds", "are": "is", "run": "runs", "wait": "waits"}[plural])
    )
    where = _site_words(p.sites[0] if p.sites else None)
    loop = p.loops[0] if p.loops else None
    if loop is not None and loop.lag_share >= LOOP_LAG_LIMIT_SHARE:
        return "event loop blocked", loop_words(loop)
    if p.gc_share >= 0.10:
        return "GC", f"{workers} {verb('spend')} {p.gc_share:.0%} of their time collecting garbage"
    kinds_ = p.idle_kinds
    idle_for_work = kinds_.get(kinds.WAITING_FOR_WORK, 0)
    working = max(1e-9, 1.0 - idle_for_work)
    # Of the time, not of thread samples: threads parked on idle keep-alive connections beside the one
    # serving do not make a busy process one that waits for work.
    for_work = p.waiting_for_work_passes
    # Held off a CPU most of the time they had work: whatever the code does, the host (or the cgroup's
    # quota) decides how fast it goes, and how long each request waits. Ahead of the GIL: a holder
    # without a CPU still holds it, and its waiters wait for the host.
    if p.cpu_starved_passes >= HOST_LIMIT_SHARE:
        return _host_limit(p, workers, verb)
    waiting = p.states.get("waiting_gil", 0)
    # Past the knee requests queue: a server whose Python holds the GIL most of the time (or as much as
    # the CPUs it shares let it) is limited by that Python work.
    if p.gil_utilisation >= 0.85 or (p.gil_utilisation >= 0.5 and waiting < 0.25):
        queued = f"; their other threads wait for it {waiting:.0%} of the time" if waiting >= 0.1 else ""
        return "CPU in Python", f"{workers} {verb('hold')} the GIL {p.gil_utilisation:.0%} of the time{where}{queued}"
    if p.mean_waiting_threads >= 0.5 and waiting >= 0.25:
        return "GIL contention", f"threads of {workers} wait for the GIL {waiting:.0%} of the time{where}"
    # A low step whose p99 broke on one slow request (at 5 rps a CPU-bound server beside a spinner
    # waited 65 % of the time): the requests were worked on, not queued, so the cause is in that work.
    if for_work >= 0.5 and (served is None or served < SERVED_NOT_QUEUED):
        return "waiting for work", (
            f"{workers} {verb('wait')} for the next request {for_work:.0%} of the time "
            "(accept, or an event loop at its selector with nothing ready) while requests queue: "
            "the requests wait before they reach the workers, or (asyncio) the handlers await something outside them"
        )
    held = p.states.get("holding_gil", 0) + p.states.get("gc", 0)
    native = p.states.get("native", 0)
    # Runnable without a CPU (a busy host or a spent quota): the thread was running Python or native
    # code when the kernel held it off, so that time is CPU demand, split in proportion.
    cpu_wait = p.states.get("cpu_wait", 0)
    if cpu_wait and held + native > 0:
        held, native = held + cpu_wait * held / (held + native), native + cpu_wait * native / (held + native)
    starved = (
        f" ({cpu_wait:.0%} of the time runnable without a CPU, {cpu_wait / working:.0%} of their working time: the host is busy)"
        if cpu_wait >= 0.1 * working
        else ""
    )
    dependency = kinds_.get(kinds.DEPENDENCY_WAIT, 0)
    if dependency >= 0.5 * working:
        return "I/O wait on a dependency", (
            f"{workers} {verb('are')} blocked in I/O inside their handlers {dependency:.0%} of the time while requests queue"
        )
    if native >= 0.5 * working or (held + native >= 0.6 * working and native >= held):
        nwhere = _site_words(p.native_sites[0] if p.native_sites else None)
        return "native code", (
            f"{workers} {verb('run')} native code without the GIL {native:.0%} of the time{nwhere}"
            + (f"; Python with the GIL {held:.0%}" if held >= 0.1 else "")
            + starved
        )
    if held + native >= 0.6 * working:
        return "CPU in Python", (
            f"{workers} {verb('hold')} the GIL {held:.0%} of the time{where}"
            + (f"; native code without it {native:.0%}" if native >= 0.1 else "")
            + starved
        )
    # The thread-sample shares above are diluted by threads idle outside requests in ways the kinds do
    # not name (a keep-alive connection's thread woken for its next request line): per sampling pass,
    # the GIL held (or the work held off a CPU) most of the time a request was in progress is still
    # the server's Python work, however few of its threads did it.
    in_progress = 1.0 - for_work
    if in_progress > 0 and (p.gil_utilisation + p.cpu_starved_passes * in_progress) >= IN_REQUEST_CPU * in_progress:
        return "CPU in Python", (
            f"{workers} {verb('hold')} the GIL {min(1.0, p.gil_utilisation / in_progress):.0%} of the time "
            f"{'they have' if n != 1 else 'it has'} a request in progress ({in_progress:.0%} of the time){where}" + starved
        )
    top = next((e for e in p.endpoints if e.file), None)
    where = f", most of it in `{top.label}`" if top is not None else ""
    return "concurrency", (
        f"{workers} {verb('are')} mostly idle inside {'their' if n != 1 else 'its'} requests ({p.states.get('idle', 0):.0%}, "
        f"{_top_idle(kinds_)}{where}) while requests queue: too few requests are served at once"
    )


# The GIL held, or the work held off a CPU, this share of the passes with a request in progress: the
# requests' own Python work is what the server spends its working time on.
IN_REQUEST_CPU = 0.6

# Runnable without a CPU at least this share of the busy processes' working time: the host is the limit.
HOST_LIMIT_SHARE = 0.5


def _host_limit(p: StepProfile, workers: str, verb: Callable) -> tuple:
    """("host CPU" or "CPU quota", words): how long the workers waited for a CPU, the kernel's figures,
    whose the CPUs were, and what would help."""
    throttled = p.cgroup_throttled_share
    quota = throttled is not None and throttled >= THROTTLED_NOTABLE
    their = "their" if p.busy_processes != 1 else "its"
    figures = [f"runnable without a CPU, none of {their} threads running"]
    if p.run_delay_ms_per_s is not None:
        figures.append(f"run queue delay {p.run_delay_ms_per_s:.0f} ms/s per thread")
    if quota:
        figures.append(f"cgroup throttled in {throttled:.0%} of its periods")
    words = (
        f"{workers} had work to do {1 - p.waiting_for_work_passes:.0%} of the time and in {p.cpu_starved_passes:.0%} of it "
        f"{'were' if p.busy_processes != 1 else 'was'} held off a CPU ({'; '.join(figures)})"
    )
    allowed, host, used = p.cpus_allowed, p.host_cpus, p.cpus_used
    if allowed is not None:
        words += (
            f"; the server may run on {allowed} of the host's {host} CPUs"
            if host and allowed < host
            else f"; the server may run on all {allowed} CPUs"
        )
        if used is not None:
            own = used >= 0.8 * allowed
            words += (
                f" and used {used:.1f}: its own {'threads' if p.busy_processes == 1 else 'processes'} keep them busy"
                if own
                else f" and used {used:.1f}: other jobs took the rest"
            )
    helps = []
    if quota:
        helps.append("a larger CPU quota")
    if allowed is not None and host and allowed < host:
        helps.append(f"more CPUs in its affinity or cpuset (it may use {allowed} of {host})")
    elif allowed is not None and used is not None and used < 0.8 * allowed and not quota:
        helps.append("a host with CPUs to spare (or fewer other jobs on it)")
    else:
        helps.append("more CPUs")
    if allowed is not None and p.busy_processes > allowed:
        helps.append(f"fewer busy workers than CPUs ({p.busy_processes} share {allowed})")
    held = p.states.get("holding_gil", 0) + p.states.get("gc", 0)
    top = (
        (p.native_sites[0] if p.native_sites else None) if p.states.get("native", 0) > held else (p.sites[0] if p.sites else None)
    )
    if top is not None:
        place = top.file if top.line == 0 else f"{top.file}:{top.line}"
        caller = f" called from `{top.caller}`" if top.caller else ""
        helps.append(f"less CPU per request (most of what it had went to `{top.function}` ({place}){caller})")
    else:
        helps.append("less CPU per request")
    return ("CPU quota" if quota else "host CPU"), f"{words}. What would help: {', '.join(helps)}"


def _top_idle(kinds_: dict) -> str:
    rest = [(k, v) for k, v in kinds_.items() if k != kinds.WAITING_FOR_WORK and v > 0]
    if not rest:
        return "e.g. sleeping"
    k, v = max(rest, key=lambda kv: kv[1])
    return f"most in {k} {v:.0%}"


def startup_words(p: StepProfile) -> Optional[str]:
    """A sentence when a step caught workers starting, so start-up is not read as load."""
    if p.startup_share < STARTUP_NOTE_SHARE:
        return None
    where = f" (`{p.startup_sites[0]}`)" if p.startup_sites else ""
    return (
        f"{p.startup_share:.0%} of the workers' samples were start-up{where}: importing or compiling, not serving; "
        "left out of the cause (a longer --warmup lets the workers finish starting)"
    )


def memory_at_end(recording: Recording) -> list:
    """RSS, PSS and USS (private pages) of the recording's processes still alive, from one read of
    each one's /proc/PID/smaps_rollup: what the workers hold after the step's load."""
    out = []
    for s in recording.sessions:
        if s.exited or s.target.pid in recording.helpers:
            continue
        m = memory_self(f"/proc/{s.target.pid}/smaps_rollup")
        if m is not None:
            out.append({"pid": s.target.pid, "rss": m["rss"], "pss": m["pss"], "uss": m["private"]})
    return out


def profile_during(
    native: Any,
    pids: list,
    run_step: Callable[[], dict],
    user_stop: Any,
    on_user_stop: Callable[[], None],
    rate_hz: float = PROFILE_RATE_HZ,
    tasks: bool = False,
) -> tuple:
    """Runs ``run_step`` (the load, in a thread) while sampling ``pids`` and their Python descendants
    (with ``tasks``, their asyncio tasks in every pass too); returns (step result, Recording).
    ``on_user_stop`` is called when the user stops the run."""
    recording = Recording(rate_hz=rate_hz)
    recording.subprocesses = True
    tracker = processes.ProcessTracker(recording, native.syscall_name, None)
    process_set = native.ProcessSet(pids, rate_hz, follow=True, **({"tasks": True} if tasks else {}))
    recording.start_time = time.time()
    step = capture.in_thread(run_step, "gilty-load-step")
    sampling_stop = capture.stop_when(lambda: user_stop.requested, step.done.is_set)
    processes.sample_processes(tracker, process_set, None, sampling_stop, time.monotonic)
    if not step.done.is_set():
        on_user_stop()
    result = step.result()
    # The server outlives its steps: the hot functions' lines are read once, at the step's end, for
    # the HTML report's source view (docs/source-view.md).
    for session in recording.sessions:
        if not session.exited and session.target.pid not in recording.helpers:
            SourceKeeper(session).finish()
    return result, recording


def other_causes(p: StepProfile, limit: str) -> list:
    """Plain words for what else slowed the server in a step besides the named limit: a lagging event
    loop, and threads holding the GIL outside any request."""
    out = []
    loop = p.loops[0] if p.loops else None
    if loop is not None and limit != "event loop blocked" and loop.spans and loop.lag_share >= 0.05:
        out.append(loop_words(loop))
    # An asyncio handler's thread samples are only its moments on the loop (all holding the GIL): where
    # its requests' tasks mostly await, its time is not CPU.
    awaiting = {(t.function, t.file) for t in getattr(p, "task_endpoints", []) if t.states.get("awaiting", 0) >= 0.5}
    cpu = [e for e in p.endpoints if e.file and e.share_holding >= 0.5 and (e.function, e.file) not in awaiting]
    if cpu and limit not in ("CPU in Python",):
        e = max(cpu, key=lambda e: e.total_s * e.share_holding)
        where = f", {e.top_site_share:.0%} under `{e.top_site}`" if e.top_site else ""
        out.append(f"endpoint `{e.label}` holds the GIL {e.share_holding:.0%} of its time{where}")
    for b in p.background[:2]:
        where = f", most under `{b.top_site}`" if b.top_site else ""
        out.append(f"thread {b.thread} (pid {b.pid}) holds the GIL {b.share_holding:.0%} of its time outside any request{where}")
    return out
