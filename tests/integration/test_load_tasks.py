"""`gilty load --tasks` against a FastAPI app on uvicorn (tests/targets/async_app/asyncapp.py) whose
requests wait in asyncio: /sleep awaits asyncio.sleep(0.05) in a helper coroutine, /sem an
asyncio.Semaphore(2) around a 20 ms sleep (100 requests/s at most). A ramp from 40 to 200 requests
per second (/sem gets four fifths: 160/s at the second step, above its capacity) must charge, per
endpoint, >= 80 % of /sleep's task time to the sleep's line and >= 50 % of /sem's to the acquire line,
and the knee's cause must name that await. Bounded, 127.0.0.1 only; on pyenv 3.12 (the task reading
itself is tested per version by test_asyncio_record.py)."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import REPO, free_port, gilty_command, gilty_env, line_of
from package_venvs import venv_python

pytestmark = [pytest.mark.interpreter, pytest.mark.alone]

SCRIPT = "async_app/asyncapp.py"
APP = REPO / "tests" / "targets" / SCRIPT
PACKAGES = ("gunicorn==23.0.0", "uvicorn==0.30.6", "fastapi==0.115.0")  # test_load_endpoints.py's venv


@pytest.fixture(scope="module")
def run(interp) -> dict:
    if interp.path is None:
        pytest.skip(interp.skip_reason)
    if interp.id != "3.12.1" and interp.minor_str != "3.12":
        pytest.skip("checked on pyenv 3.12 only")
    if interp.id.startswith("debian"):
        pytest.skip("checked on pyenv 3.12 only")
    python = venv_python(interp, "server", PACKAGES, "import gunicorn, uvicorn, fastapi")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [
        *gilty_command(),
        "load",
        f"{base}/sleep@1",
        f"{base}/sem@4",
        "--ramp",
        "40:200:160",
        "--slo",
        "p50=200ms",
        "--duration",
        "4",
        "--tasks",
        "--format",
        "json",
        "--",
        python,
        "-m",
        "uvicorn",
        "--app-dir",
        str(APP.parent),
        "asyncapp:app",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=gilty_env())
    assert done.returncode in (0, 10), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def _endpoints(step: dict) -> dict:
    return {e["function"].rsplit(".", 1)[-1]: e for e in step["profile"]["task_endpoints"]}


def test_sleep_endpoint_awaits_the_sleep_line(run):
    for step in run["steps"]:
        e = _endpoints(step)["sleep_endpoint"]
        assert e["file"] == str(APP), e
        top = e["awaits"][0]
        assert (top["kind"], top["function"], top["line"]) == ("sleep", "helper", line_of(SCRIPT, "sleep")), e["awaits"]
        assert top["share"] >= 0.8, (step["requested_rate"], e)


def test_semaphore_endpoint_above_capacity_awaits_the_acquire_line(run):
    last = run["steps"][-1]
    if last["requested_rate"] * 4 / 5 <= 100:
        pytest.skip(
            f"the ramp stopped at {last['requested_rate']:g} rps (p50 {last['latency_s']['p50']}): the machine is too busy to reach the semaphore's capacity"
        )
    e = _endpoints(last)["sem_endpoint"]
    top = e["awaits"][0]
    assert (top["kind"], top["function"], top["line"]) == ("semaphore", "sem_endpoint", line_of(SCRIPT, "acquire")), e["awaits"]
    assert top["share"] >= 0.5, e
    # Below capacity the semaphore is free: the 20 ms sleep inside it is what the requests await.
    first = _endpoints(run["steps"][0])["sem_endpoint"]
    assert (first["awaits"][0]["kind"], first["awaits"][0]["line"]) == ("sleep", line_of(SCRIPT, "held")), first["awaits"]


def test_knee_names_the_await(run):
    knee = run["knee"]
    assert knee is not None, run["steps"]
    if knee["rate"] is None:
        pytest.skip(f"the first step missed the SLO (p50 {run['steps'][0]['latency_s']['p50']}): the machine is too busy")
    assert knee["rate"] == 40, knee
    assert "awaiting `async with sem:" in knee["explanation"] and "asyncapp.py:" in knee["explanation"], knee


def test_every_endpoint_has_its_row(run):
    assert {"sleep_endpoint", "sem_endpoint"} <= set(_endpoints(run["steps"][-1])), run["steps"][-1]["profile"]["task_endpoints"]
