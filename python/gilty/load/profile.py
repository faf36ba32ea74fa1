"""The server's side of a load step: its processes sampled on the same clock while the step runs,
summarised as what the workers did (GIL held, waited for, native, idle, GC), where (function and
caller), and what limits the server at the knee."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from gilty.sampling import processes
from gilty.sampling.analysis.states import gc_share, gil_utilisation, mean_waiting_threads, thread_states
from gilty.sampling.analysis.syscalls import IO_WAIT, SELECT_WAIT, idle_kind
from gilty.load import endpoints, eventloop
from gilty.observe.monitor.memory_self import memory_self
from gilty.load.sites import is_library, library_prefixes, site_key
from gilty.sampling.session import GC, HOLDING_GIL, IDLE, STATE_NAMES, Recording

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
    busy_processes: int  # the processes that held the GIL in at least 5 % of passes (the workers doing the work)
    gil_utilisation: float  # mean over the busy processes
    gc_share: float
    mean_waiting_threads: float
    states: dict  # state name -> share of the busy processes' request-handling threads' samples
    idle_kinds: dict  # idle kind -> share of the same samples
    sites: list = field(default_factory=list)  # [Site], the busiest first
    endpoints: list = field(default_factory=list)  # [endpoints.Endpoint], most server time first
    loops: list = field(default_factory=list)  # [eventloop.LoopLag], the most lagging first
    rate_hz: float = PROFILE_RATE_HZ  # of the sampling, so a reader can turn seconds back into samples
    memory: list = field(default_factory=list)  # [{"pid", "rss", "pss", "uss"}] bytes, read as the step ended
    background: list = field(default_factory=list)  # [endpoints.BackgroundThread]: GIL held outside requests


def _busy(recording: Recording) -> list:
    sessions = [s for s in recording.sessions if s.samples]
    busy = [s for s in sessions if gil_utilisation(s) >= 0.05]
    return busy or sessions


def summarise_step(recording: Recording, loop_threshold_s: float = eventloop.DEFAULT_THRESHOLD_S) -> Optional[StepProfile]:
    sessions = _busy(recording)
    if not sessions:
        return None
    util = sum(gil_utilisation(s) for s in sessions) / len(sessions)
    gcs = sum(gc_share(s) for s in sessions) / len(sessions)
    waiting = sum(mean_waiting_threads(s) for s in sessions) / len(sessions)
    # States of the threads that did something: pool threads parked all along would bury the signal.
    counts = [0] * len(STATE_NAMES)
    kinds: dict = {}
    for s in sessions:
        per_thread = thread_states(s)
        for tid, st in per_thread.items():
            if st.counts[IDLE] >= 0.98 * st.samples:
                continue
            for code, n in enumerate(st.counts):
                counts[code] += n
        for (tid, _first, passes, state, _stack, nr) in s.runs():
            st = per_thread.get(tid)
            if state == IDLE and st is not None and st.counts[IDLE] < 0.98 * st.samples:
                kind = idle_kind(s.syscall_label(nr))
                kinds[kind] = kinds.get(kind, 0) + passes
    total = sum(counts) or 1
    sites: dict = {}
    passes_total = sum(s.samples for s in sessions) or 1
    for s in sessions:
        prefixes = library_prefixes(s)
        for (tid, state, stack_id), n in s.stack_counts().items():
            if state not in (HOLDING_GIL, GC):
                continue
            stack = s.stack(stack_id)
            if not stack:
                continue
            # Pool a library function's lines: `quote` is one site whichever of its lines was sampled.
            function, file, line, caller = site_key(stack, prefixes)
            key = (function, file, line if not is_library(file, prefixes) else 0, caller)
            sites[key] = sites.get(key, 0) + n
    ranked = sorted(sites.items(), key=lambda kv: -kv[1])[:TOP_SITES]
    loops = eventloop.loop_lags([s for s in recording.sessions if s.samples], loop_threshold_s)
    return StepProfile(
        processes=len(recording.sessions),
        busy_processes=len(sessions),
        gil_utilisation=util,
        gc_share=gcs,
        mean_waiting_threads=waiting,
        states={name: counts[code] / total for code, name in enumerate(STATE_NAMES)},
        idle_kinds={k: n / total for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])},
        sites=[Site(f, file, line, caller, n / passes_total) for (f, file, line, caller), n in ranked],
        # Every process, not only the busy ones: a worker whose loop is blocked in a sleep holds no GIL.
        endpoints=endpoints.endpoint_table(recording.sessions),
        loops=loops,
        rate_hz=recording.rate_hz,
        background=endpoints.background_threads(recording.sessions, {(lag.pid, lag.tid) for lag in loops}),
    )


# A loop away from its selector (in spans over the threshold) this much of the time is the limit: every
# request on that worker waits for those spans whatever else the server could do.
LOOP_LAG_LIMIT_SHARE = 0.3


def loop_words(loop: eventloop.LoopLag) -> str:
    top = loop.culprits[0] if loop.culprits else None
    where = ""
    if top is not None:
        where = f"; most of it under `{top.site}`" + (f" called from `{top.caller}`" if top.caller else "") + f", {top.doing}"
    return (f"the event loop of pid {loop.pid} ({loop.thread}) did not get back to its selector for {loop.lag_share:.0%} "
            f"of the time in {loop.spans} spans over {loop.threshold_s * 1e3:g} ms (up to {loop.max_span_s * 1e3:.0f} ms){where}")


def limit_from_profile(p: StepProfile) -> tuple:
    """(limit name, plain words) for a step past the knee, from what the server's workers did."""
    n = p.busy_processes
    workers = f"the {n} busiest processes" if n != 1 else "the busiest process"
    verb = (lambda plural: plural) if n != 1 else (lambda plural: {"spend": "spends", "hold": "holds", "are": "is", "run": "runs"}[plural])
    top = p.sites[0] if p.sites else None
    where = ""
    if top is not None:
        place = top.file if top.line == 0 else f"{top.file}:{top.line}"
        where = f", {top.share:.0%} under `{top.function}` ({place})"
        if top.caller:
            where += f" called from `{top.caller}`"
    loop = p.loops[0] if p.loops else None
    if loop is not None and loop.lag_share >= LOOP_LAG_LIMIT_SHARE:
        return "event loop blocked", loop_words(loop)
    if p.gc_share >= 0.10:
        return "GC", f"{workers} {verb('spend')} {p.gc_share:.0%} of their time collecting garbage"
    waiting = p.states.get("waiting_gil", 0)
    # Past the knee requests queue: a server whose Python holds the GIL most of the time (or as much as
    # the CPUs it shares let it) is limited by that Python work.
    if p.gil_utilisation >= 0.85 or (p.gil_utilisation >= 0.5 and waiting < 0.25):
        queued = f"; their other threads wait for it {waiting:.0%} of the time" if waiting >= 0.1 else ""
        return "CPU in Python", f"{workers} {verb('hold')} the GIL {p.gil_utilisation:.0%} of the time{where}{queued}"
    if p.mean_waiting_threads >= 0.5 and waiting >= 0.25:
        return "GIL contention", f"threads of {workers} wait for the GIL {waiting:.0%} of the time{where}"
    io = p.idle_kinds.get(IO_WAIT, 0) + p.idle_kinds.get(SELECT_WAIT, 0)
    if io >= 0.5:
        return "I/O wait on a dependency", f"{workers} {verb('are')} blocked in I/O {io:.0%} of the time while requests queue"
    if p.states.get("native", 0) >= 0.5:
        return "native code", f"{workers} {verb('run')} native code without the GIL {p.states['native']:.0%} of the time"
    return "concurrency", f"{workers} {verb('are')} mostly idle ({p.states.get('idle', 0):.0%}, e.g. sleeping) while requests queue: too few requests are served at once"


def memory_at_end(recording: Recording) -> list:
    """RSS, PSS and USS (private pages) of the recording's processes still alive, from one read of
    each one's /proc/PID/smaps_rollup: what the workers hold after the step's load."""
    out = []
    for s in recording.sessions:
        if s.exited:
            continue
        m = memory_self(f"/proc/{s.target.pid}/smaps_rollup")
        if m is not None:
            out.append({"pid": s.target.pid, "rss": m["rss"], "pss": m["pss"], "uss": m["private"]})
    return out


class _StepStop:
    """``requested`` once the load step has finished or the user asked to stop."""

    def __init__(self, user_stop: Any, done: threading.Event) -> None:
        self.user_stop, self.done = user_stop, done

    @property
    def requested(self) -> bool:
        return self.done.is_set() or getattr(self.user_stop, "requested", False)


def profile_during(
    native: Any,
    pids: list,
    run_step: Callable[[], dict],
    user_stop: Any,
    on_user_stop: Callable[[], None],
    rate_hz: float = PROFILE_RATE_HZ,
) -> tuple:
    """Runs ``run_step`` (the load, in a thread) while sampling ``pids`` and their Python descendants;
    returns (step result, Recording). ``on_user_stop`` is called when the user stops the run."""
    recording = Recording(rate_hz=rate_hz)
    recording.subprocesses = True
    tracker = processes.ProcessTracker(recording, native.syscall_name, None)
    process_set = native.ProcessSet(pids, rate_hz, follow=True)
    recording.start_time = time.time()
    done = threading.Event()
    out: dict = {}

    def target():
        try:
            out["result"] = run_step()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            out["error"] = e
        finally:
            done.set()

    worker = threading.Thread(target=target, name="gilty-load-step", daemon=True)
    worker.start()
    processes.sample_processes(tracker, process_set, None, _StepStop(user_stop, done), time.monotonic)
    if not done.is_set():
        on_user_stop()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out["result"], recording



def other_causes(p: StepProfile, limit: str) -> list:
    """Plain words for what else slowed the server in a step besides the named limit: a lagging event
    loop, and threads holding the GIL outside any request."""
    out = []
    loop = p.loops[0] if p.loops else None
    if loop is not None and limit != "event loop blocked" and loop.spans and loop.lag_share >= 0.05:
        out.append(loop_words(loop))
    cpu = [e for e in p.endpoints if e.file and e.share_holding >= 0.5]
    if cpu and limit not in ("CPU in Python",):
        e = max(cpu, key=lambda e: e.total_s * e.share_holding)
        where = f", {e.top_site_share:.0%} under `{e.top_site}`" if e.top_site else ""
        out.append(f"endpoint `{e.label}` holds the GIL {e.share_holding:.0%} of its time{where}")
    for b in p.background[:2]:
        where = f", most under `{b.top_site}`" if b.top_site else ""
        out.append(f"thread {b.thread} (pid {b.pid}) holds the GIL {b.share_holding:.0%} of its time outside any request{where}")
    return out
