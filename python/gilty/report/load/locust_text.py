"""The text of a Locust run (``load.result.LocustResult``)."""

from __future__ import annotations

from gilty.report.load.text import ms, profile_line, server_sections


def render(result) -> str:
    """A Locust run (``load.result.LocustResult``): its own figures, labelled closed loop, per second
    joined with the server's GIL."""
    run, prof = result.figures, result.profile
    agg = run["aggregated"] or {}
    lines = [
        f"gilty load --locustfile {run['locustfile']}: Locust, {run['users']} users (spawn rate {run['spawn_rate']:g}/s), "
        f"{run['workers']} local worker{'s' if run['workers'] != 1 else ''}, {run['duration_s']:g} s"
        + (f", host {run['host']}" if run["host"] else "")
    ]
    lines.append("CLOSED LOOP: each Locust user waits for its answer before its next request, so a slow server is sent less")
    lines.append("and these latencies omit the requests never sent (not corrected for coordinated omission; gilty's own")
    lines.append("open-loop generator is `gilty load URL --rate/--ramp`).")
    lines.append("")
    lines.append(f"  {'REQUEST':<34} {'COUNT':>7} {'FAIL':>5} {'RPS':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>9}")
    for r in [*run["requests"], *([agg] if agg else [])]:
        name = f"{r['method']} {r['name']}".strip()
        rps = "-" if r["rps"] is None else f"{r['rps']:.1f}"
        lines.append(
            f"  {name:<34} {r['count']:>7} {r['failures']:>5} {rps:>8} {ms(r['p50_s']):>8} {ms(r['p90_s']):>8} "
            f"{ms(r['p99_s']):>8} {ms(r['max_s']):>9}"
        )
    if run["seconds"]:
        lines.append("")
        lines.append("Per second: requests counted by Locust's master in that second, its rolling percentiles (workers report")
        lines.append("every few seconds), and the GIL utilisation of the busiest server process in the same second:")
        lines.append(
            f"  {'SECOND':>6} {'USERS':>6} {'REQS':>8} {'FAIL/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'SERVER GIL':>11}"
        )
        t0 = run["seconds"][0]["t"]
        for sec in run["seconds"]:
            gil = sec.get("server_gil")
            lines.append(
                f"  {sec['t'] - t0:>6} {sec['users']:>6} {sec['requests']:>8} {sec['failures_s'] or 0:>7.1f} "
                f"{ms(sec['p50_s']):>8} {ms(sec['p95_s']):>8} {ms(sec['p99_s']):>8} {'-' if gil is None else f'{gil:.0%}':>11}"
            )
    if prof is not None:
        lines.append("")
        lines.append(
            "Server during the run (busiest processes: the GIL's share of the time, then their working threads' samples by state):"
        )
        lines.append(profile_line("locust", prof))
        lines.extend(server_sections(["the Locust run"], [prof]))
        also = _also(prof)
        if also:
            lines.append("")
            lines.append("Seen in the server: " + "; ".join(also) + ".")
    if run.get("stopped"):
        lines.append("Stopped early (Ctrl-C): PARTIAL.")
    return "\n".join(lines) + "\n"


def _also(prof) -> list:
    # A closed loop has no knee to name a limit at; what slowed the server is still worth saying.
    from gilty.load.profile import other_causes

    return other_causes(prof, "")
