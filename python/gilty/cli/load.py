"""Load a web service with open-loop arrivals and measure latency as its users would see it.

  gilty load http://127.0.0.1:8000/ --rate 100 --duration 10
  gilty load http://127.0.0.1:8000/ --ramp 50:1000:50 --slo p99=50ms
  gilty load http://127.0.0.1:8000/ --ramp 50:500:50 --slo p99=50ms --profile MASTER_PID
  gilty load http://127.0.0.1:8000/ --ramp 50:500:50 -- gunicorn -w 4 app:app
  gilty load http://127.0.0.1:8000 --locustfile locustfile.py --users 50 --workers 2 -- gunicorn app:app

Requests start on a fixed schedule (constant or Poisson arrivals) whether or not earlier ones have
returned; latency counts from each request's intended start, so a server stall is charged to every
request it delayed. With --ramp, the rate steps up until a step misses the SLO (p99 at most the
limit and at most 1 % errors), and the knee is the highest rate that met it.

With --profile PID (the server's master; its Python descendants are followed) or a server command
after `--` (started, waited for until the URL answers, stopped at the end), every step also samples
the server on the same clock: what its workers did, where, and at the knee the limit in plain words.

The report option may also end the server command, as in
  gilty load URL --ramp 50:1000:50 --slo p99=50ms -- gunicorn app:app -o run.html
a trailing -o/--output FILE after the server command is gilty's (said on stderr), unless gilty's own
-o came before `--`; then the server gets it.

With --locustfile, Locust runs headless (a master and --workers local workers) instead of gilty's
generator; its closed-loop figures are labelled as such and joined per second with the profile.
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import threading
import time
import urllib.parse
from dataclasses import asdict

from gilty._errors import EXIT_ALL_FAILED, EXIT_OK, EXIT_SERVER_NOT_READY, EXIT_TARGET_EXITED, CommandError, UsageError
from gilty.cli.options import (
    add_format_argument,
    bounded_float,
    bounded_int,
    check_output,
    emit,
    output_format,
    pid_number,
    positive_int,
    seconds,
)
from gilty.load import analysis, locust, profile, ready
from gilty.load.plan import MAX_RATE, LoadOptions, native_plan, parse_header, parse_ramp, parse_slo, parse_url
from gilty.load.sites import app_fragments
from gilty.report import load as load_report
from gilty.sampling import launch

DEFAULT_DURATION_S = 10.0
DEFAULT_STEP_S = 5.0
POLL_S = 0.05
SERVER_START_TIMEOUT_S = 30.0
SERVER_WARMUP_S = 1.0  # unmeasured load on a server gilty started, unless --warmup says otherwise
ACCEPTS_CHILD_COMMAND = True
# More would only exhaust file descriptors or CPUs before sending anything useful.
MAX_CONNECTIONS = 100_000
MAX_THREADS = 256


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "gilty load URL[@WEIGHT] [URL ...] (--rate RPS | --ramp FROM:TO:STEP) [--duration S] [--slo p99=50ms] [options]\n"
        "       gilty load [URL] --locustfile F [--users N] [--spawn-rate R] [--workers K] [--duration S] [options]"
    )
    parser.add_argument(
        "urls", nargs="*", metavar="URL", help="http:// URL to load; URL@WEIGHT to weight several (with --locustfile: the host)"
    )
    parser.add_argument("--rate", type=bounded_float(0.0, MAX_RATE), metavar="RPS", help="requests started per second")
    parser.add_argument(
        "--ramp", metavar="FROM:TO:STEP", help="step the rate up, stopping after the first step that misses the SLO"
    )
    parser.add_argument(
        "--duration",
        type=seconds,
        metavar="S",
        help=f"seconds per run or per ramp step (default {DEFAULT_DURATION_S:g} / {DEFAULT_STEP_S:g})",
    )
    parser.add_argument(
        "--slo", metavar="pXX=LIMIT", help="latency objective for --ramp, e.g. p99=50ms (errors must stay <= 1%%)"
    )
    parser.add_argument(
        "--arrivals", choices=("constant", "poisson"), default="constant", help="arrival process (default: constant)"
    )
    parser.add_argument("--seed", type=bounded_int(0, 2**64 - 1), default=1, help="seed of the Poisson arrivals (default 1)")
    parser.add_argument(
        "--max-in-flight",
        type=positive_int,
        default=1000,
        metavar="N",
        help="arrivals beyond N requests in flight are dropped and counted (default 1000)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=10.0,
        metavar="S",
        help="a request without a full answer after S seconds is a timeout (default 10)",
    )
    parser.add_argument(
        "--connections",
        type=bounded_int(1, MAX_CONNECTIONS),
        default=64,
        metavar="N",
        help="keep-alive connections per host, at most (default 64); an arrival waits for a free one",
    )
    parser.add_argument(
        "--threads", type=bounded_int(1, MAX_THREADS), default=1, metavar="N", help="generator threads (default 1)"
    )
    parser.add_argument("-X", "--method", default="GET", help="HTTP method (default GET)")
    parser.add_argument(
        "-H", "--header", action="append", default=[], metavar="'NAME: VALUE'", help="a request header (repeatable)"
    )
    parser.add_argument("--body", help="request body (text)")
    parser.add_argument(
        "--profile",
        type=pid_number,
        metavar="PID",
        help="sample this server process and its Python descendants during every step",
    )
    parser.add_argument(
        "--warmup",
        type=seconds,
        metavar="S",
        help=f"first load the server at the first rate for S seconds, unmeasured (lazy imports, caches, connections; default {SERVER_WARMUP_S:g} for a server gilty starts, else 0)",
    )
    parser.add_argument(
        "--app",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="with a profile: this package (or module) is the application's code wherever it is installed, e.g. site-packages (repeatable)",
    )
    parser.add_argument(
        "--tasks",
        action="store_true",
        help="with a profile: also read every asyncio task in each pass, and split each endpoint's requests' time into running, waiting for the GIL and awaiting (what, at which line)",
    )
    parser.add_argument(
        "--loop-lag",
        type=bounded_float(0.0, 60_000.0),
        default=20.0,
        metavar="MS",
        help="with a profile: report asyncio loop spans away from the selector longer than MS (default 20)",
    )
    parser.add_argument(
        "--locustfile", metavar="F", help="run Locust headless with this locustfile instead (closed loop; see docs/load.md)"
    )
    parser.add_argument(
        "--users",
        type=bounded_int(1, MAX_CONNECTIONS),
        default=10,
        metavar="N",
        help="with --locustfile: Locust users (default 10)",
    )
    parser.add_argument(
        "--spawn-rate",
        type=bounded_float(0.0, MAX_RATE),
        default=10.0,
        metavar="R",
        help="with --locustfile: users started per second (default 10)",
    )
    parser.add_argument(
        "--workers",
        type=bounded_int(1, MAX_THREADS),
        default=1,
        metavar="K",
        help="with --locustfile: local Locust worker processes (default 1)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout (may also end the server command)"
    )
    add_format_argument(parser, ("text", "json", "html"))


def take_trailing_output(args: argparse.Namespace) -> None:
    """`-- SERVER ARGS -o run.html`: a trailing ``-o FILE`` / ``--output FILE`` / ``--output=FILE`` after
    the server command is gilty's report file when gilty's own -o was not given before ``--``."""
    child = getattr(args, "child_argv", None)
    if not child or args.output is not None:
        return
    if len(child) >= 3 and child[-2] in ("-o", "--output"):
        path, server = child[-1], child[:-2]
    elif len(child) >= 2 and child[-1].startswith("--output="):
        path, server = child[-1].split("=", 1)[1], child[:-1]
    else:
        return
    if not path:
        return
    args.output, args.child_argv = path, server
    print(
        f"gilty: the trailing `-o {path}` is gilty's: the report goes to {path} (to pass -o to the server, "
        "give gilty's -o before --)",
        file=sys.stderr,
    )


def _run_profiled_step(native, plan: dict, stop, pids: list, tasks: bool = False) -> tuple:
    native_stop = native.LoadStop()

    def load():
        try:
            return native.load_run(plan, native_stop)
        except ValueError as e:
            raise UsageError(str(e)) from None

    return profile.profile_during(native, pids, load, stop, native_stop.set, tasks=tasks)


def _wait_until_listening(url: str, child, timeout_s: float = SERVER_START_TIMEOUT_S, stop=None) -> None:
    """Until a GET of the URL gets an HTTP answer (any status): a prefork server's master accepts
    connections before its workers have imported the app. A server that exits first is one line."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if stop is not None and stop.requested:
            raise KeyboardInterrupt  # Ctrl-C before anything was loaded: `gilty: interrupted`, 130
        if child.poll() is not None:
            raise CommandError(
                f"the server command exited with status {child.returncode} before {host}:{port} answered", EXIT_TARGET_EXITED
            )
        conn = http.client.HTTPConnection(host, port, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
        try:
            conn.request("GET", path)
            conn.getresponse().read()
            return
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
        finally:
            conn.close()
    raise CommandError(f"the server did not answer on {host}:{port} within {timeout_s:g} s", EXIT_SERVER_NOT_READY)


def _app(args: argparse.Namespace) -> tuple:
    """``--app`` names as path fragments; a name that is no package or module name is one line."""
    for name in args.app:
        if not name or not all(part.isidentifier() for part in name.split(".")):
            raise UsageError(f"--app {name!r}: expected a package or module name, e.g. httpbin or shop.views")
    return app_fragments(args.app)


def _wait_for_workers(url: str, root: int, child=None):
    """Every worker of the server answering before the load is measured (said on stderr, with how
    long it took): load on workers still importing their application measures start-up."""
    alive = (lambda: child.poll() is None) if child is not None else (lambda: True)
    r = ready.wait_for_workers(url, root, SERVER_START_TIMEOUT_S, alive)
    if r is None:
        return None
    n = len(r.workers)
    what = f"{n} worker{'s' if n != 1 else ''}" if n != 1 or r.workers[0] != root else "the server"
    if r.router:
        router = ", ".join(map(str, r.router))
        state = "settled" if r.complete else "not settled (their start-up may show in the first step)"
        print(
            f"gilty: the server answered through its router (pid {router}) in {r.seconds:.1f} s; {what} behind it "
            f"(pid{'s' if n != 1 else ''} {', '.join(map(str, r.workers))}), {state}",
            file=sys.stderr,
        )
        return r
    if r.complete:
        print(
            f"gilty: {what} answered in {r.seconds:.1f} s (pid{'s' if n != 1 else ''} {', '.join(map(str, r.workers))})",
            file=sys.stderr,
        )
    else:
        print(
            f"gilty: warning: {len(r.answered)} of {n} workers answered within {r.seconds:.0f} s; "
            f"not pid {', '.join(map(str, r.missing))}: their start-up may show in the first step",
            file=sys.stderr,
        )
    return r


def _run_step(native, plan: dict, stop) -> dict:
    """One native run in a thread, so that Ctrl-C (seen by the main thread) can end it early."""
    native_stop = native.LoadStop()
    out: dict = {}

    def target():
        try:
            out["result"] = native.load_run(plan, native_stop)
        except BaseException as e:  # noqa: BLE001 - handed back to the main thread
            out["error"] = e

    worker = threading.Thread(target=target, name="gilty-load", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(POLL_S)
        if stop.requested and not native_stop.is_set:
            native_stop.set()
    if "error" in out:
        err = out["error"]
        if isinstance(err, ValueError):
            raise UsageError(str(err))
        raise err
    return out["result"]


def _run_locust(args: argparse.Namespace, fmt: str) -> int:
    """Locust's users instead of the open-loop generator; the server profiled meanwhile, as for a step."""
    if args.rate is not None or args.ramp is not None:
        raise UsageError("--locustfile runs Locust's own users (a closed loop): give --users, not --rate or --ramp")
    if not os.path.isfile(args.locustfile):
        raise UsageError(f"{args.locustfile}: no such locustfile")
    if len(args.urls) > 1:
        raise UsageError("with --locustfile give at most one URL: the host Locust's users call")
    child_argv = getattr(args, "child_argv", None)
    if child_argv is not None and args.profile is not None:
        raise UsageError("give either --profile PID or a server command after --, not both")
    if child_argv is not None and not args.urls:
        raise UsageError("with a server command, give the URL it serves (Locust's host)")
    # Locust joins the host and each task's path: "http://h:p/" + "/" would ask for "//".
    host = parse_url(args.urls[0])[0].rstrip("/") if args.urls else None
    app = _app(args)
    duration = args.duration or DEFAULT_DURATION_S
    run = locust.LocustRun(locust.LocustOptions(args.locustfile, args.users, args.spawn_rate, args.workers, duration, host))
    locust.locust_command()  # a missing Locust is one line before any server starts
    recording = prof = None
    with launch.StopSignals() as stop:
        child = None
        try:
            pids = [args.profile] if args.profile is not None else None
            if child_argv is not None:
                child = launch.start_command(child_argv, die_with_gilty=True)
                _wait_until_listening(host, child, stop=stop)
                pids = [child.pid]
            if pids is not None and host is not None:
                _wait_for_workers(host, pids[0], child)
            print(f"gilty: Locust: {args.users} users, {args.workers} workers, {duration:g} s (closed loop)", file=sys.stderr)
            if pids is None:
                result = _blocking(run.run, stop, run.stop)
            else:
                native = launch.native_module()
                result, recording = profile.profile_during(native, pids, run.run, stop, run.stop, tasks=args.tasks)
                prof = profile.summarise_step(recording, args.loop_lag / 1e3, app)
                if prof is not None:
                    prof.memory = profile.memory_at_end(recording)
        finally:
            run.cleanup()
            if child is not None:
                launch.terminate(child)
        stopped = stop.requested
    locust.join_profile(result["seconds"], recording)
    report = {
        "locustfile": args.locustfile,
        "host": host,
        "users": args.users,
        "spawn_rate": args.spawn_rate,
        "workers": args.workers,
        "duration_s": duration,
        "stopped": stopped,
        **result,
        "profile": None if prof is None else asdict(prof),
    }
    if fmt == "html":
        text = load_report.render_locust_html(report, recording)
    else:
        text = load_report.render_locust_json(report) if fmt == "json" else load_report.render_locust_text(report, prof)
    emit(text, args.output)
    return EXIT_OK  # a Ctrl-C'd run is a result, marked PARTIAL in the report, as for `gilty record`


def _blocking(call, stop, on_stop) -> dict:
    """``call()`` in a thread, so that Ctrl-C (seen by the main thread) can ask it to end."""
    out: dict = {}

    def target():
        try:
            out["result"] = call()
        except BaseException as e:  # noqa: BLE001 - handed back to the main thread
            out["error"] = e

    worker = threading.Thread(target=target, name="gilty-locust", daemon=True)
    worker.start()
    asked = False
    while worker.is_alive():
        worker.join(POLL_S)
        if stop.requested and not asked:
            on_stop()
            asked = True
    if "error" in out:
        raise out["error"]
    return out["result"]


def run(args: argparse.Namespace) -> int:
    take_trailing_output(args)
    fmt = output_format(args.format, args.output, ("text", "json", "html"))
    check_output(args.output)
    if args.locustfile is not None:
        return _run_locust(args, fmt)
    if not args.urls:
        raise UsageError("give the URL to load (see `gilty load --help`)")
    if (args.rate is None) == (args.ramp is None):
        raise UsageError("give either --rate RPS or --ramp FROM:TO:STEP (see `gilty load --help`)")
    slo = parse_slo(args.slo)
    app = _app(args)
    rates = [args.rate] if args.rate is not None else parse_ramp(args.ramp)
    duration = args.duration or (DEFAULT_DURATION_S if args.rate is not None else DEFAULT_STEP_S)
    options = LoadOptions(
        urls=[parse_url(u) for u in args.urls],
        method=args.method.upper(),
        headers=[parse_header(h) for h in args.header],
        body=(args.body or "").encode(),
        arrivals=args.arrivals,
        seed=args.seed,
        max_in_flight=args.max_in_flight,
        timeout_s=args.timeout,
        connections=args.connections,
        threads=args.threads,
    )
    native = launch.native_module()
    child_argv = getattr(args, "child_argv", None)
    if child_argv is not None and args.profile is not None:
        raise UsageError("give either --profile PID or a server command after --, not both")
    steps, verdicts, profiles, recordings = [], [], [], []
    stopped = False
    readiness = None
    with launch.StopSignals() as stop:
        child = None
        try:
            pids = [args.profile] if args.profile is not None else None
            if child_argv is not None:
                child = launch.start_command(child_argv, die_with_gilty=True)
                _wait_until_listening(options.urls[0][0], child, stop=stop)
                pids = [child.pid]
            if pids is not None and not stop.requested:
                readiness = _wait_for_workers(options.urls[0][0], pids[0], child)
            # Every worker has answered once: lazy imports and caches of other routes may remain.
            warmup = args.warmup if args.warmup is not None else (SERVER_WARMUP_S if child is not None else None)
            if warmup and not stop.requested:
                print(f"gilty: warming up at {rates[0]:g} rps for {warmup:g} s (not measured)", file=sys.stderr)
                _run_step(native, native_plan(options, rates[0], warmup), stop)
            for rate in rates:
                if stop.requested:
                    stopped = True
                    break
                print(f"gilty: loading at {rate:g} rps for {duration:g} s", file=sys.stderr)
                plan = native_plan(options, rate, duration)
                if pids is None:
                    step, prof = _run_step(native, plan, stop), None
                else:
                    step, recording = _run_profiled_step(native, plan, stop, pids, args.tasks)
                    prof = profile.summarise_step(recording, args.loop_lag / 1e3, app)
                    if prof is not None:
                        prof.memory = profile.memory_at_end(recording)
                    step["profile"] = None if prof is None else asdict(prof)
                    recordings.append((rate, recording))
                verdict = analysis.judge(step, slo)
                steps.append(step)
                verdicts.append(verdict)
                profiles.append(prof)
                if step["stopped"] or stop.requested:
                    stopped = True
                    break
                if args.ramp is not None and not verdict.meets_slo:
                    break  # past the knee
        finally:
            if child is not None:
                launch.terminate(child)
    knee = analysis.find_knee(steps, verdicts, slo) if args.ramp is not None and steps else None
    if knee is not None and knee.limit == "concurrency" and profiles and profiles[-1] is not None:
        knee.limit, why = profile.limit_from_profile(profiles[-1])
        knee.explanation = f"{knee.explanation.split(';')[0]}; {why}"
        also = profile.other_causes(profiles[-1], knee.limit)
        if also:
            knee.explanation += ". Also: " + "; ".join(also)
    if knee is not None:
        notes = analysis.knee_notes(verdicts, knee)
        started = profiles and profiles[-1] is not None and profile.startup_words(profiles[-1])
        if started:
            notes.append(started)
        if notes:
            knee.explanation += ". Note: " + "; ".join(notes)
    result = {
        "urls": options.urls,
        "arrivals": options.arrivals,
        "slo": slo,
        "steps": steps,
        "verdicts": verdicts,
        "stopped": stopped,
        "knee": knee,
        "profiles": profiles,
        "workers_ready": None if readiness is None else asdict(readiness),
    }
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
    if fmt == "html":
        text = load_report.render_html(result, recordings[-1] if recordings else None)
    else:
        text = load_report.render_json(result) if fmt == "json" else load_report.render_text(result)
    emit(text, args.output)
    if args.output is not None and knee is not None:
        print(f"gilty: {load_report.knee_line(result)}", file=sys.stderr)  # the answer, not only a file name
    sent = sum(s["sent"] for s in steps)
    if sent and not any(s["ok"] for s in steps):
        errors: dict = {}
        for s in steps:
            for kind, n in s["errors"].items():
                errors[kind] = errors.get(kind, 0) + n
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(errors.items(), key=lambda kv: -kv[1])[:3]) or "no answer"
        print(f"gilty: error: every one of the {sent} requests failed ({what})", file=sys.stderr)
        return EXIT_ALL_FAILED
    return EXIT_OK  # a Ctrl-C'd run is a result, marked PARTIAL in the report, as for `gilty record`
