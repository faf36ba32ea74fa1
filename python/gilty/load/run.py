"""One `gilty load` run: the steps of gilty's open-loop generator (a rate, or a ramp up to the knee)
or Locust's users, the server profiled during each, and what the run means."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any, Union

from gilty._errors import EXIT_ALL_FAILED, EXIT_OK, UsageError
from gilty.load import analysis, locust, profile
from gilty.load.options import LoadOptions
from gilty.load.plan import native_plan
from gilty.load.result import LoadRun, LocustResult
from gilty.load.server import serving
from gilty.sampling import capture, launch


def run(options: LoadOptions, stop: Any) -> Union[LoadRun, LocustResult]:
    if options.locust is not None:
        return run_locust(options, stop)
    return run_steps(options, stop)


def _load_step(native, plan: dict, native_stop):
    def load() -> dict:
        try:
            return native.load_run(plan, native_stop)
        except ValueError as e:
            raise UsageError(str(e)) from None

    return load


def _step(native, plan: dict, stop) -> dict:
    """One native run in a thread, so that Ctrl-C (seen by the main thread) can end it early."""
    native_stop = native.LoadStop()
    return capture.wait_for(_load_step(native, plan, native_stop), stop, native_stop.set, "gilty-load")


def _profiled_step(native, plan: dict, stop, pids: list, tasks: bool) -> tuple:
    native_stop = native.LoadStop()
    return profile.profile_during(native, pids, _load_step(native, plan, native_stop), stop, native_stop.set, tasks=tasks)


def _summarise(recording, options: LoadOptions):
    prof = profile.summarise_step(recording, options.server.loop_lag_s, options.server.app)
    if prof is not None:
        prof.memory = profile.memory_at_end(recording)
    return prof


def run_steps(options: LoadOptions, stop: Any) -> LoadRun:
    gen, rates, duration = options.generator, options.rates, options.duration_s
    native = launch.native_module()
    steps, verdicts, profiles, recordings = [], [], [], []
    stopped = False
    with serving(options.server, gen.urls[0][0], stop) as server:
        # Every worker has answered once: lazy imports and caches of other routes may remain.
        warmup = options.server.warmup(started=server.child is not None)
        if warmup and not stop.requested:
            print(f"gilty: warming up at {rates[0]:g} rps for {warmup:g} s (not measured)", file=sys.stderr)
            _step(native, native_plan(gen, rates[0], warmup), stop)
        for rate in rates:
            if stop.requested:
                stopped = True
                break
            print(f"gilty: loading at {rate:g} rps for {duration:g} s", file=sys.stderr)
            plan = native_plan(gen, rate, duration)
            if server.pids is None:
                step, prof = _step(native, plan, stop), None
            else:
                step, recording = _profiled_step(native, plan, stop, server.pids, options.server.tasks)
                prof = _summarise(recording, options)
                step["profile"] = None if prof is None else asdict(prof)
                recordings.append((rate, recording))
            verdict = analysis.judge(step, options.slo)
            steps.append(step)
            verdicts.append(verdict)
            profiles.append(prof)
            if step["stopped"] or stop.requested:
                stopped = True
                break
            if options.ramp and not verdict.meets_slo:
                break  # past the knee
    result = LoadRun(
        urls=gen.urls,
        arrivals=gen.arrivals,
        slo=options.slo,
        steps=steps,
        verdicts=verdicts,
        stopped=stopped,
        knee=_knee(steps, verdicts, profiles, options.slo) if options.ramp and steps else None,
        profiles=profiles,
        workers_ready=None if server.readiness is None else asdict(server.readiness),
        step_recording=recordings[-1] if recordings else None,
    )
    _warn(verdicts)
    return result


def _knee(steps: list, verdicts: list, profiles: list, slo) -> analysis.Knee:
    """The knee, its limit named from the last step's profile when the steps alone say only
    'concurrency', with what else slowed the server and the caveats."""
    reading = analysis.read_knee(steps, verdicts, slo)
    last = profiles[-1] if profiles else None
    if reading.limit == "concurrency" and last is not None:
        served = profile.served_share(last, verdicts[-1].littles_l)
        reading.limit, reading.cause = profile.limit_from_profile(last, served)
        reading.also = profile.other_causes(last, reading.limit)
    reading.notes = analysis.knee_notes(verdicts, reading)
    started = last is not None and profile.startup_words(last)
    if started:
        reading.notes.append(started)
    return reading.knee()


def _warn(verdicts: list) -> None:
    few = [v for v in verdicts if v.few_answers]
    if few:
        v = few[0]
        print(
            f"gilty: warning: {v.percentile.replace('_', '.')} at {', '.join(f'{x.rate:g}' for x in few)} rps rests on fewer than "
            f"{analysis.min_answers(v.percentile)} answers ({v.answers} at {v.rate:g} rps): a longer --duration makes it a percentile",
            file=sys.stderr,
        )
    for v in verdicts:
        if v.generator_behind:
            print(
                f"gilty: warning: at {v.rate:g} rps the generator fell behind its schedule; latencies include its delay",
                file=sys.stderr,
            )


def exit_status(result: Union[LoadRun, LocustResult]) -> int:
    """After the report is written: every request failing is an error (exit 6); a Ctrl-C'd run is a
    result, marked PARTIAL in the report, as for `gilty record`."""
    if not isinstance(result, LoadRun):
        return EXIT_OK
    steps = result.steps
    sent = sum(s["sent"] for s in steps)
    if sent and not any(s["ok"] for s in steps):
        errors: dict = {}
        for s in steps:
            for kind, n in s["errors"].items():
                errors[kind] = errors.get(kind, 0) + n
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(errors.items(), key=lambda kv: -kv[1])[:3]) or "no answer"
        print(f"gilty: error: every one of the {sent} requests failed ({what})", file=sys.stderr)
        return EXIT_ALL_FAILED
    return EXIT_OK


def run_locust(options: LoadOptions, stop: Any) -> LocustResult:
    """Locust's users instead of the open-loop generator; the server profiled meanwhile, as for a step."""
    o = options.locust
    users = locust.LocustRun(o)
    locust.locust_command()  # a missing Locust is one line before any server starts
    recording = prof = None
    with serving(options.server, o.host, stop) as server:
        try:
            print(f"gilty: Locust: {o.users} users, {o.workers} workers, {o.duration_s:g} s (closed loop)", file=sys.stderr)
            if server.pids is None:
                figures = capture.wait_for(users.run, stop, users.stop, "gilty-locust")
            else:
                native = launch.native_module()
                figures, recording = profile.profile_during(
                    native, server.pids, users.run, stop, users.stop, tasks=options.server.tasks
                )
                prof = _summarise(recording, options)
        finally:
            users.cleanup()
    locust.join_profile(figures["seconds"], recording)
    report = {
        "locustfile": o.locustfile,
        "host": o.host,
        "users": o.users,
        "spawn_rate": o.spawn_rate,
        "workers": o.workers,
        "duration_s": o.duration_s,
        "stopped": stop.requested,
        **figures,
        "profile": None if prof is None else asdict(prof),
    }
    return LocustResult(report, prof, recording)
