"""`gilty load` on a saturated host: a uWSGI server (master, `--http` router, three workers) pinned to
one CPU beside two spinning processes pinned to the same CPU. Its workers spend most of their request
time runnable without a CPU: the knee's limit is the host, said with the kernel's figures and what would
help, and the master, the router and the workers between requests (blocked in C, with no Python frame)
wait for work rather than for I/O inside a request (issue 31, item 1). gilty itself runs on the other
CPU, so the generator and the sampler do not add to the wait they measure."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TARGETS, free_port, gilty_command, gilty_env

pytestmark = pytest.mark.alone

UWSGI = Path(sys.executable).parent / "uwsgi"
SERVER_CPU = 0
# Rounds of render_quote per request: about 12 ms of CPU here, so the server's share of one CPU serves
# well under the ramp's 200 rps even when the spinners leave it more than a third.
CALLS = "60"


@contextlib.contextmanager
def _spinners(n: int):
    code = f"import os\nos.sched_setaffinity(0, {{{SERVER_CPU}}})\nwhile True: pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _gilty_cpus() -> list:
    cpus = sorted(os.sched_getaffinity(0) - {SERVER_CPU})
    if not cpus:
        pytest.skip("needs two CPUs: one for the server and its spinners, one for gilty")
    return ["taskset", "-c", ",".join(map(str, cpus))]


def _load(fmt: str, out: Path) -> subprocess.CompletedProcess:
    if not UWSGI.exists():
        pytest.skip(
            f"uwsgi not installed at {UWSGI} (requirements-dev.txt; it builds with a C compiler and the interpreter's headers)"
        )
    port = free_port()
    server = [
        "taskset",
        "-c",
        str(SERVER_CPU),
        str(UWSGI),
        "--http",
        f"127.0.0.1:{port}",
        "--master",
        "--processes",
        "3",
        "--wsgi-file",
        str(TARGETS / "uwsgi_cpu_app.py"),
        "--env",
        f"UWSGI_CPU_CALLS={CALLS}",
        "--disable-logging",
        "--die-on-term",
    ]
    argv = [
        *_gilty_cpus(),
        *gilty_command(),
        "load",
        f"http://127.0.0.1:{port}/",
        "--ramp",
        "20:200:20",
        "--duration",
        "2",
        "--slo",
        "p99=250ms",
        "--format",
        fmt,
        "-o",
        str(out),
        "--",
        *server,
    ]
    with _spinners(2):
        return subprocess.run(argv, capture_output=True, text=True, timeout=180, env=gilty_env())


def test_saturated_host_is_the_knee_limit_with_its_figures(tmp_path):
    out = tmp_path / "load.json"
    done = _load("json", out)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    run = json.loads(out.read_text())
    knee = run["knee"]
    assert knee["rate"] is not None, knee
    words = knee["explanation"]
    assert knee["limit"] == "host CPU", knee
    # The figures: how long the workers waited for a CPU, the kernel's run-queue delay, the one CPU
    # the server may run on, and what would help; the code that used the CPU it had.
    assert "runnable without a CPU" in words and "run queue" in words, words
    assert "may run on 1 of" in words, words
    assert "would help" in words, words
    assert "render_quote" in words and "uwsgi_cpu_app.py" in words, words
    last = run["steps"][-1]["profile"]
    # The master, the router and the idle workers, blocked in C between requests, are not I/O inside
    # a request.
    assert last["idle_kinds"].get("I/O wait", 0.0) < 0.05 and last["idle_kinds"].get("I/O wait in a request", 0.0) < 0.05, last[
        "idle_kinds"
    ]
    assert abs(sum(v for k, v in last["states"].items()) - 1.0) < 0.01, last["states"]


def test_a_starved_thread_per_connection_server_is_not_waiting_for_work(tmp_path):
    # The CI failure of test_profiled_knee_names_cpu_in_python_and_the_code on a busy machine: the
    # standard library's ThreadingHTTPServer, CPU-bound in its handler, read as "waiting for work"
    # because its keep-alive connection threads, reading their next request, outnumber the one serving.
    # Here it shares one CPU with a spinner: whatever the limit, it is the CPU, named with the code.
    script = str(TARGETS / "http_cpu_server.py")
    port = free_port()
    out = tmp_path / "load.json"
    # 100 rounds a request (~7 ms of CPU alone, several times that beside the spinner): past the knee the
    # server is busy most of the time. With 25 it crossed the SLO on scheduling delays while idle half the
    # time, and its limit read either way ("waiting for work" at 49 % idle passes, "CPU in Python" at 51 %).
    argv = [
        *_gilty_cpus(),
        *gilty_command(),
        "load",
        f"http://127.0.0.1:{port}/",
        "--ramp",
        "5:125:20",
        "--duration",
        "2",
        "--slo",
        "p99=100ms",
        "--format",
        "json",
        "-o",
        str(out),
        "--",
        "taskset",
        "-c",
        str(SERVER_CPU),
        sys.executable,
        script,
        str(port),
        "100",
    ]
    with _spinners(1):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=gilty_env())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    knee = json.loads(out.read_text())["knee"]
    # before: "waiting for work", "the busiest process waits for the next request 65% of the time"
    assert knee["limit"] in ("host CPU", "CPU in Python", "GIL contention"), knee
    assert "quote" in knee["explanation"] and "http_cpu_server.py" in knee["explanation"], knee["explanation"]
