"""`gilty load` against real HTTP servers on 127.0.0.1 with known service times: latency equals the
service time when the server keeps up; a server stopped for 1 s shows in p99 and in the stalled
second (coordinated omission corrected); a server that serves one request at a time in 10 ms has
its knee at 100 rps; bad input is one line. Every run is bounded in time and goes to loopback only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import TARGETS, free_port, gilty_command, gilty_env, start_target
from timing_reference import TRANSPORT_S, Pressure, assert_unless_busy, busy, quantile, server_times, within_server_time

pytestmark = pytest.mark.alone


@pytest.fixture(scope="module")
def delay_server():
    port = free_port()
    proc = start_target(sys.executable, "http_delay_server.py", str(port), "0.02", "threads")
    yield proc, f"http://127.0.0.1:{port}/"
    proc.stop()


def load_json(*args, timeout=120) -> dict:
    args = [str(a) for a in args]
    at = args.index("--") if "--" in args else len(args)  # a server command after -- keeps its own args
    argv = [*gilty_command(), "load", *args[:at], "--format", "json", *args[at:]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=gilty_env())
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("rate", [50, 500])
def test_latency_is_the_service_time(delay_server, rate):
    # The reference is the server's own time for the same requests, not the 20 ms it was asked for:
    # Python's sleep and parsing add to it what the machine allows. Latency adds to it the loopback,
    # the wake-ups on both sides and how late the generator itself was (its own lag).
    _proc, url = delay_server
    server_times(url)  # forget earlier tests' requests
    pressure = Pressure()
    step = load_json(url, "--rate", rate, "--duration", 3)["steps"][0]
    pressure = pressure.share()
    assert step["sent"] == rate * 3 and step["ok"] == step["sent"], step["errors"]
    served = server_times(url, step["ok"])
    assert len(served) == step["ok"]
    assert abs(step["verdict"]["throughput"] - rate) <= rate * 0.02
    print(
        within_server_time(
            "latency p50", step["latency_s"]["p50"], quantile(served, 0.5), TRANSPORT_S + step["generator"]["lag_p99_s"], pressure
        )
    )


def test_a_stalled_server_shows_in_p99_and_in_its_second(delay_server):
    proc, url = delay_server

    def stall():
        time.sleep(4.0)
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGCONT)

    server_times(url)  # forget earlier tests' requests
    staller = threading.Thread(target=stall)
    staller.start()
    try:
        pressure = Pressure()
        step = load_json(url, "--rate", 100, "--duration", 10)["steps"][0]
        pressure = pressure.share()
    finally:
        staller.join()
        os.kill(proc.pid, signal.SIGCONT)
    # 100 of 1000 requests were meant to start during the stall: each waited for its end.
    assert step["latency_s"]["p99"] >= 0.5, step["latency_s"]
    maxima = [(s["t"], s["latency_s"]["max"]) for s in step["seconds"]]
    stalled = [t for t, most in maxima if most and most >= 0.5]
    assert stalled, maxima
    # The other requests are untouched: the median is still the server's own (its time for a request
    # read after the stall does not contain the stall).
    served = server_times(url, step["ok"])
    measured = within_server_time(
        "latency p50",
        step["latency_s"]["p50"],
        quantile(served, 0.5),
        TRANSPORT_S + step["generator"]["lag_p99_s"],
        pressure,
        note=" (p99 showed the stall)",
    )
    print(measured)
    # Only the stalled second has a request of half a second, unless the machine stalled some by itself.
    elsewhere = [t for t in stalled if not 3 <= t <= 5]
    if elsewhere and busy(pressure):
        pytest.skip(
            f"the machine stalled requests by itself ({busy(pressure)}): seconds {elsewhere} also had "
            f"a request of 0.5 s or more; maxima {[(t, round(m, 3)) for t, m in maxima if m]}; {measured}"
        )
    assert not elsewhere, maxima


KNEE_RAMP = (70, 130, 10)
KNEE_TRIES = 3


# The server's own time per request at the lowest rate (send to answer: 10 ms of service, Python's
# parsing and a connection per request) must be that of a 10 ms server for the run to judge its knee.
KNEE_SERVICE_P50_S = (0.0098, 0.0110)
KNEE_SERVICE_P99_S = 0.0125


def knee_run_is_clean(run: dict) -> str:
    """Why a knee run cannot judge a 10 ms server ("" when it can): the generator fell behind its own
    schedule (its lag or CPU warning) at a step up to the first that missed the SLO, or other jobs on
    the machine made the server itself slower or jittery (its low-load service time says so)."""
    service = run["steps"][0]["service_s"]
    if not (KNEE_SERVICE_P50_S[0] <= service["p50"] <= KNEE_SERVICE_P50_S[1]) or service["p99"] > KNEE_SERVICE_P99_S:
        return f"the server took p50 {service['p50'] * 1e3:.1f} ms, p99 {service['p99'] * 1e3:.1f} ms per request at low load"
    for step in run["steps"]:
        if step["verdict"]["generator_behind"]:
            return (
                f"at {step['requested_rate']:g} rps the generator fell behind (lag p99 "
                f"{step['generator']['lag_p99_s'] * 1e3:.1f} ms, {step['generator']['cpu_s']:.2f} CPU-s)"
            )
        if not step["verdict"]["meets_slo"]:
            break
    return ""


def test_knee_of_a_one_at_a_time_server():
    # A busy machine delays the generator (its own lag/CPU warning says so) or slows the server (its
    # measured time per request says so): such a run cannot judge the knee and is run again; if every
    # try was disturbed, the test skips saying why instead of blaming the tool.
    start, stop, step = KNEE_RAMP
    why = []
    for _ in range(KNEE_TRIES):
        port = free_port()
        proc = start_target(sys.executable, "http_delay_server.py", str(port), "0.01", "serial")
        try:
            run = load_json(
                f"http://127.0.0.1:{port}/", "--ramp", f"{start}:{stop}:{step}", "--duration", 3, "--slo", "p99=50ms", timeout=200
            )
        finally:
            proc.stop()
        reason = knee_run_is_clean(run)
        if not reason:
            break
        why.append(reason)
    else:
        pytest.skip(f"the machine is too busy for a knee: in {KNEE_TRIES} runs " + "; ".join(why))
    knee = run["knee"]
    assert knee is not None and knee["rate"] is not None and 90 <= knee["rate"] <= 110, knee
    assert knee["limit"] == "concurrency"
    assert 0.9 <= knee["effective_concurrency"] <= 1.3, knee
    # the ramp stops after the first step past the knee
    assert run["steps"][-1]["verdict"]["meets_slo"] is False
    assert all(s["verdict"]["meets_slo"] for s in run["steps"][:-1])


def test_connection_refused_is_counted_by_kind():
    # Every request failed: the report is still written, and the exit status says so (11), with one line.
    argv = [*gilty_command(), "load", f"http://127.0.0.1:{free_port()}/", "--rate", "20", "--duration", "1", "--format", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=gilty_env())
    assert done.returncode == 11, done.stderr
    assert "Traceback" not in done.stderr
    assert [l for l in done.stderr.splitlines() if "error" in l] == [
        l for l in done.stderr.splitlines() if l.startswith("gilty: error: every one of the")
    ]
    step = json.loads(done.stdout)["steps"][0]
    assert step["ok"] == 0 and step["errors"] == {"connect": step["sent"]}


@pytest.mark.parametrize(
    "args,message",
    [
        (("ftp://127.0.0.1/", "--rate", "10"), "only http:// URLs are supported"),
        (("http://127.0.0.1:1/", "--rate", "10", "--ramp", "1:2:1"), "give either --rate"),
        (("http://127.0.0.1:1/", "--ramp", "5:1:1"), "need 0 < FROM <= TO"),
        (("http://127.0.0.1:1/", "--ramp", "1:5:1", "--slo", "p98=1ms"), "expected e.g. p99=50ms"),
        (("http://127.0.0.1:1/", "--rate", "10", "-H", "nocolon"), "is not a header"),
        (("--rate", "10"), "give the URL to load"),
        (("http://127.0.0.1:1/", "--rate", "10", "--app", "my app"), "expected a package or module name"),
        (("--locustfile", "/nonexistent/locustfile.py"), "no such locustfile"),
        (("http://127.0.0.1:1/", "--locustfile", str(TARGETS / "locust_tasks.py"), "--rate", "10"), "not --rate or --ramp"),
        (("http://127.0.0.1:1/", "http://127.0.0.1:2/", "--locustfile", str(TARGETS / "locust_tasks.py")), "at most one URL"),
    ],
)
def test_bad_input_is_one_line(args, message):
    done = subprocess.run([*gilty_command(), "load", *args], capture_output=True, text=True, timeout=30, env=gilty_env())
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_ctrl_c_ends_the_run_with_a_partial_report(delay_server):
    _proc, url = delay_server
    proc = subprocess.Popen(
        [*gilty_command(), "load", url, "--rate", "50", "--duration", "60", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gilty_env(),
    )
    # Interrupt once requests flow (a busy machine may take seconds to start gilty and the server).
    first_lines = []
    while not any("loading at" in line for line in first_lines):
        line = proc.stderr.readline()
        if not line:
            break
        first_lines.append(line)
    time.sleep(1.0)
    pressure = Pressure()
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    err = "".join(first_lines) + err
    stopped_in = time.monotonic() - sent
    assert_unless_busy(stopped_in < 5.0, pressure, f"gilty load took {stopped_in:.1f} s to stop after Ctrl-C")  # a hang check
    assert proc.returncode == 0, err  # issue 30: a Ctrl-C'd run is a result (was 8, "target exited early")
    report = json.loads(out)
    assert report["stopped"] and 0 < report["steps"][0]["sent"] < 3000


# Issue 8: the knee comes with what the server did. A handler that builds URLs in Python holds the
# GIL; past the knee the server's busiest process holds it nearly all the time, under `quote`
# called from the application's own code.
SIZED_SERVICE_S = 0.010
# The busiest process's threads runnable without a CPU this share of the first step (quiet: 0.02;
# beside eight CPU hogs: 0.20) and other jobs had its CPU.
STARVED_CPU_WAIT = 0.10


def server_starved(run: dict) -> str:
    """How other jobs took the server's CPU ("" when they did not): at the first step, far below its
    capacity, its threads waited for a CPU at least STARVED_CPU_WAIT of the time. Beside eight CPU hogs
    a request sized for 10 ms then took 17-21 ms, and the knee is the host's, not the server's."""
    first = run["steps"][0]
    cpu_wait = (first.get("profile") or {}).get("states", {}).get("cpu_wait", 0.0)
    if cpu_wait < STARVED_CPU_WAIT:
        return ""
    return (
        f"at {first['requested_rate']:g} rps the server's threads waited for a CPU {cpu_wait:.0%} of the time and "
        f"took {first['service_s']['mean'] * 1e3:.1f} ms per request, sized for {SIZED_SERVICE_S * 1e3:.0f} ms"
    )


def profiled_run_is_clean(run: dict) -> str:
    """Why a profiled ramp cannot name the server's limit ("" when it can): even its first step missed
    the SLO (other jobs left the server too little CPU for 30 rps), the generator fell behind, or the
    whole ramp stayed under the server's capacity (its work per request was sized on a busier CPU)."""
    if run["knee"]["rate"] is None:
        first = run["steps"][0]
        return (
            f"already at {first['requested_rate']:g} rps p99 was {first['latency_s']['p99'] * 1e3:.0f} ms "
            f"(server time per request {first['service_s']['mean'] * 1e3:.0f} ms)"
        )
    if run["knee"]["limit"] == "generator":
        return "the generator fell behind its schedule"
    if run["knee"]["limit"] == "none reached":
        last = run["steps"][-1]
        return (
            f"no knee up to {last['requested_rate']:g} rps (server time per request "
            f"{last['service_s']['mean'] * 1e3:.1f} ms against the {SIZED_SERVICE_S * 1e3:.0f} ms it was sized for)"
        )
    return ""


# What the profile past the knee held, printed when the limit it named is wrong.
WHAT_DECIDED = (
    "states",
    "gil_utilisation",
    "waiting_for_work_passes",
    "cpu_starved_passes",
    "busy_processes",
    "mean_waiting_threads",
    "idle_kinds",
)


def test_profiled_knee_names_cpu_in_python_and_the_code():
    script = str(TARGETS / "http_cpu_server.py")
    # About 10 ms of Python per request, sized on this machine now (150 calls took 10.5 ms when this
    # test was written and 18 ms on a later VM, which put the knee below the ramp's first step).
    why = []
    for _ in range(2):
        calls = int(
            subprocess.run(
                [sys.executable, script, "--calls-for", str(round(SIZED_SERVICE_S * 1e3))],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout
        )
        port = free_port()
        pressure = Pressure()
        run = load_json(
            f"http://127.0.0.1:{port}/",
            "--ramp",
            "30:200:30",
            "--duration",
            2,
            "--slo",
            "p99=100ms",
            "--",
            sys.executable,
            script,
            port,
            calls,
            timeout=240,
        )
        pressure = pressure.share()
        reason = profiled_run_is_clean(run)
        if not reason:
            break
        why.append(reason)
    else:
        pytest.skip("the machine is too busy to find a knee: " + "; ".join(why))
    knee = run["knee"]
    # On a quiet machine the busiest process holds the GIL >= 85 % past the knee: "CPU in Python". When
    # other jobs share the 2 CPUs, the holder is descheduled during handoffs and the same overload reads
    # as threads queueing for the GIL; either way the cause named must be the handler's Python code.
    # When the handler threads were runnable without a CPU most of their working time, the host is the
    # limit (issue 31, item 1), and its explanation names the same code as what used the CPU. Never
    # "waiting for work": the idle keep-alive threads beside the one serving outnumber it, but the
    # server had a request in progress most of the time (the CI failure this guards).
    last = run["steps"][-1]["profile"]
    if knee["limit"] in ("host CPU", "CPU quota"):
        assert last["cpu_starved_passes"] >= 0.5, (knee, last)
        assert "`quote`" in knee["explanation"] and "http_cpu_server.py" in knee["explanation"], knee["explanation"]
        return
    named = knee["rate"] is not None and knee["limit"] in ("CPU in Python", "GIL contention")
    if not named and server_starved(run):
        pytest.skip(f"the machine was too busy to name the limit ({server_starved(run)}): {knee}")
    assert named, (knee, {k: last.get(k) for k in WHAT_DECIDED}, [s["profile"] is not None for s in run["steps"]])
    assert "quote" in knee["explanation"] and "http_cpu_server.py" in knee["explanation"], knee["explanation"]
    # The ramp ends at the first step past the knee, which can be only just past the server's capacity:
    # there queueing breaks the p99 with the GIL busy about 80 % of the time (0.82-0.83 measured on a
    # quiet machine), so the bar is 0.75. On a busy one the GIL is free while a woken handler waits for a
    # CPU, so the bar is on the time the server had a request in progress (a share of sampling passes:
    # shares of thread samples are diluted by the keep-alive threads waiting for their next request,
    # 0.445 GIL + 0.05 waiting + 0.046 cpu_wait in one such run). Measured at load 6-11: 0.70-1.0; the
    # 0.70 was a step whose p99 other jobs broke before the server was full: that skips, saying so.
    # A clean clone's alone part also read 0.59 with the limit named right (CPU in Python): the p99
    # broken by a stall before the server was full. The bar is therefore the analysis's own: in progress
    # at least half the time, or it would (rightly) read "waiting for work".
    in_progress = 1.0 - last["waiting_for_work_passes"]
    if in_progress < 0.5 and busy(pressure):
        pytest.skip(
            f"other jobs broke the SLO before the server was full ({busy(pressure)}): past the knee it had a "
            f"request in progress {in_progress:.0%} of the time, GIL held {last['gil_utilisation']:.0%}"
        )
    assert in_progress >= 0.5, last
    first = run["steps"][0]["profile"]
    assert first["gil_utilisation"] < last["gil_utilisation"]
    # Per endpoint: the standard library's handle_one_request dispatches to the handler's do_GET.
    top = last["endpoints"][0]
    assert top["function"].rsplit(".", 1)[-1] == "do_GET" and top["file"].endswith("http_cpu_server.py"), top
    assert top["top_site"].startswith("quote ("), top
