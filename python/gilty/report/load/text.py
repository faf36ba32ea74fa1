"""The text of a load run (``load.result.LoadRun``): the step curve, Little's law, the knee and its limit;
the server lines here are the Locust run's text too."""

from __future__ import annotations


def ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def knee_line(run) -> str:
    """The knee and its cause in one line (the text report's, and on stderr when the report goes to a file)."""
    knee = run.knee
    if knee.rate is None:
        return f"Knee: below {run.steps[0]['requested_rate']:g} rps. {knee.explanation}."
    return f"Knee: {knee.rate:g} rps (limit: {knee.limit}). {knee.explanation}."


def render(run) -> str:
    """A ``load.result.LoadRun``."""
    lines = [f"gilty load: {', '.join(u for u, _w in run.urls)} ({run.arrivals} arrivals, open loop)"]
    ready = run.workers_ready
    if ready:
        n = len(ready["workers"])
        if ready.get("router"):
            router = ", ".join(map(str, ready["router"]))
            lines.append(
                f"Before the load, the server answered through its router (pid {router}) in {ready['seconds']:.1f} s, "
                f"{n} worker{'s' if n != 1 else ''} behind it"
                + ("." if ready["complete"] else " (not yet settled: their start-up may show in the first step).")
            )
        elif ready["complete"]:
            lines.append(f"Before the load, {n} worker{'s' if n != 1 else ''} answered in {ready['seconds']:.1f} s.")
        else:
            lines.append(
                f"Before the load, {len(ready['answered'])} of {n} workers answered within {ready['seconds']:.0f} s "
                f"(not pid {', '.join(map(str, ready['missing']))}): their start-up may show in the first step."
            )
    lines.append("")
    lines.append(
        f"{'RATE':>8} {'ACHIEVED':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>9} {'ERR%':>6} {'DROP':>6} {'L':>7} {'λW':>7}  "
    )
    for step, v in zip(run.steps, run.verdicts):
        lat = step["latency_s"]
        mark = "" if v.meets_slo else "  ✗ SLO"
        if v.generator_behind:
            mark += "  generator behind"
        if getattr(v, "few_answers", False):
            mark += f"  {v.percentile.replace('_', '.')} from {v.answers} answers"
        lines.append(
            f"{v.rate:>8g} {v.throughput:>9.1f} {ms(lat['p50']):>8} {ms(lat['p90']):>8} {ms(lat['p99']):>8} "
            f"{ms(lat['max']):>9} {v.error_share * 100:>6.1f} {step['dropped']:>6} {v.littles_l:>7.2f} {v.littles_lw:>7.2f}{mark}"
        )
    if len(run.urls) > 1:
        lines.append("")
        lines.append("Per URL (latency from the intended start):")
        lines.append(f"{'RATE':>8}  {'URL':<40} {'OK':>7} {'ERR':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>9}")
        for step in run.steps:
            for r in step["per_request"]:
                lat = r["latency_s"]
                lines.append(
                    f"{step['requested_rate']:>8g}  {r['url']:<40} {r['ok']:>7} {r['errors']:>5} "
                    f"{ms(lat['p50']):>8} {ms(lat['p99']):>8} {ms(lat['max']):>9}"
                )
    profiles = run.profiles or []
    if any(p is not None for p in profiles):
        lines.append("")
        lines.append(
            "Server during each step (the busiest workers: the GIL's share of the time, then their working threads' samples"
        )
        lines.append("by state, adding up to 100 %; start-up left out):")
        for step, p in zip(run.steps, profiles):
            if p is not None:
                lines.append(profile_line(f"{step['requested_rate']:g} rps", p))
    lines.extend(server_sections([f"{step['requested_rate']:g} rps" for step in run.steps], profiles))
    lines.append("")
    lines.append("Latency is measured from each request's intended start (coordinated omission corrected).")
    lines.append("L: time-average requests in flight; λW: answers per second × mean send-to-answer time (Little's law: L = λW).")
    few = [v for v in run.verdicts if getattr(v, "few_answers", False)]
    if few:
        from gilty.load.analysis import min_answers

        key = few[0].percentile
        lines.append(
            f"{key.replace('_', '.')} from fewer than {min_answers(key)} answers (marked) is about the slowest answer, not a percentile."
        )
    errors: dict = {}
    for step in run.steps:
        for kind, n in step["errors"].items():
            errors[kind] = errors.get(kind, 0) + n
    if errors:
        lines.append("Errors: " + ", ".join(f"{k} {n}" for k, n in sorted(errors.items())))
    if run.knee is not None:
        lines.append("")
        lines.append(knee_line(run))
    if run.stopped:
        lines.append("Stopped early (Ctrl-C): the last step is PARTIAL.")
    return "\n".join(lines) + "\n"


def server_sections(labels: list, profiles: list) -> list:
    """Endpoints (of the last profiled step), event loops (every step) and threads outside requests,
    as text lines; ``labels`` name the steps ("50 rps")."""
    lines: list = []
    last_index = next((i for i in range(len(profiles) - 1, -1, -1) if profiles[i] is not None), None)
    last = profiles[last_index] if last_index is not None else None
    if last is not None and last.endpoints:
        lines.append("")
        lines.append(
            f"Server time per endpoint at {labels[last_index]} (thread-seconds by state; the handler under the framework's dispatch):"
        )
        states = ("holding_gil", "waiting_gil", "idle", "native", "gc", "cpu_wait")
        lines.append(
            f"  {'ENDPOINT':<34} {'TOTAL s':>8} " + " ".join(f"{n.upper():>11}" for n in states) + "  TOP SITE (GIL held)"
        )
        for e in last.endpoints:
            cells = " ".join(f"{e.seconds.get(n, 0.0):>11.2f}" for n in states)
            site = f"{e.top_site} {e.top_site_share:.0%}" if e.top_site else ""
            lines.append(f"  {e.label:<34} {e.total_s:>8.2f} {cells}  {site}")
    if last is not None and getattr(last, "task_endpoints", None):
        lines.append("")
        lines.append(f"Requests' asyncio tasks per endpoint at {labels[last_index]} (shares of the tasks' wall time; --tasks):")
        cols = ("holding_gil", "waiting_gil", "native", "ready", "awaiting")
        lines.append(f"  {'ENDPOINT':<34} {'TASK s':>8} " + " ".join(f"{n.upper():>11}" for n in cols) + "  TOP AWAIT")
        for e in last.task_endpoints:
            cells = " ".join(f"{e.states.get(n, 0.0):>11.0%}" for n in cols)
            top = e.awaits[0] if e.awaits else None
            what = (
                f"{top['kind']} {top['share']:.0%} at {top['function']} ({top['file'].rsplit('/', 1)[-1]}:{top['line']})"
                if top
                else ""
            )
            if top and top["code"]:
                what += f": {top['code']}"
            lines.append(f"  {e.label:<34} {e.task_s:>8.2f} {cells}  {what}")
    loop_lines = []
    steps_with = {}  # (pid, tid) -> [the loop at each step it was seen]
    for p in profiles:
        for loop in p.loops if p is not None else []:
            steps_with.setdefault((loop.pid, loop.tid), []).append(loop)
    # A loop that never left its selector at any step (gunicorn's arbiter has one) is one line, not one
    # per step: it served none of the load.
    quiet = {key for key, seen in steps_with.items() if all(x.spans == 0 and x.lag_s == 0 for x in seen)}
    for label, p in zip(labels, profiles):
        for loop in p.loops if p is not None else []:
            if (loop.pid, loop.tid) in quiet:
                continue
            top = loop.culprits[0] if loop.culprits else None
            where = f"; {top.seconds / loop.lag_s:.0%} under {top.site}, {top.doing}" if top and loop.lag_s else ""
            loop_lines.append(
                f"{label:>12}: pid {loop.pid} {loop.thread}: at its selector {loop.at_rest:.0%}, "
                f"{loop.spans} lag spans > {loop.threshold_s * 1e3:g} ms (max {loop.max_span_s * 1e3:.0f} ms), "
                f"lagging {loop.lag_share:.0%}{where}"
            )
    for pid, tid in sorted(quiet):
        seen = steps_with[(pid, tid)]
        loop_lines.append(
            f"{'every step':>12}: pid {pid} {seen[0].thread}: at its selector {min(x.at_rest for x in seen):.0%} or more, "
            f"no lag span > {seen[0].threshold_s * 1e3:g} ms"
        )
    if loop_lines:
        lines.append("")
        lines.append("Event loops (asyncio; a lag span: the loop did not get back to its selector):")
        lines.extend(loop_lines)
    if last is not None and last.background:
        lines.append("")
        lines.append("Threads holding the GIL outside any request (they compete with the handlers for it):")
        for b in last.background:
            lines.append(
                f"  pid {b.pid} {b.thread}: holds the GIL {b.share_holding:.0%} of its time"
                + (f", most under {b.top_site}" if b.top_site else "")
            )
    return lines


def profile_line(label: str, p) -> str:
    top = p.sites[0] if p.sites else None
    place = "" if top is None else (top.file if top.line == 0 else f"{top.file}:{top.line}")
    where = f"; top {top.function} ({place}) {top.share:.0%}" + (f" <- {top.caller}" if top.caller else "") if top else ""
    mem = ""
    if p.memory:
        mem = f", PSS {sum(m['pss'] for m in p.memory) / 2**20:.0f} MiB / USS {sum(m['uss'] for m in p.memory) / 2**20:.0f} MiB in {len(p.memory)}"
    started = getattr(p, "startup_share", 0.0)
    startup = f"; start-up {started:.0%}" + (f" ({p.startup_sites[0]})" if p.startup_sites else "") if started >= 0.005 else ""
    held_off = getattr(p, "holder_cpu_wait", 0.0)
    holder = f" ({held_off:.0%} by a holder without a CPU)" if held_off >= 0.005 else ""
    return (
        f"{label:>12}: {p.busy_processes}/{p.processes} busy, GIL held {p.gil_utilisation:.0%} of the time{holder}; "
        f"threads {state_shares(p)}{startup}{mem}{where}"
    )


# The per-step states in the order a reader adds them up; "unknown" only when seen.
_LINE_STATES = (
    ("holding_gil", "Python"),
    ("gc", "gc"),
    ("waiting_gil", "GIL wait"),
    ("native", "native"),
    ("cpu_wait", "CPU wait"),
    ("idle", "idle"),
    ("unknown", "unknown"),
)


def state_shares(p) -> str:
    """The busy workers' thread states as whole percents that add up to 100 (largest remainders get
    the rounding), waiting for work said inside idle."""
    shares = [(label, p.states.get(name, 0.0)) for name, label in _LINE_STATES]
    total = sum(v for _l, v in shares)
    if total <= 0:
        return "not seen"
    exact = [100.0 * v / total for _l, v in shares]
    whole = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: whole[i] - exact[i])[: 100 - sum(whole)]:
        whole[i] += 1
    parts = [f"{label} {n}%" for (label, _v), n in zip(shares, whole) if label != "unknown" or n]
    for_work = p.idle_kinds.get("waiting for work", 0) / total
    if for_work >= 0.005:
        i = next(i for i, part in enumerate(parts) if part.startswith("idle "))
        parts[i] += f" (waiting for work {for_work:.0%})"
    return ", ".join(parts)
