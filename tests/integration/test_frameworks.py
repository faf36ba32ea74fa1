"""The endpoint table of `gilty load` under each web framework, RPC server and task queue users run
(issue 31, item 6: aiohttp's dispatch was not recognised, so an aiohttp server had no endpoint table
and no task endpoints). Real apps (tests/targets/framework_apps), each handler spending a few ms of
CPU per request, all installed from PyPI into one cached venv on pyenv 3.12; the apps of a group run
at once behind one front server (launch.py) and are loaded by ONE short `gilty load` run, so each
framework costs the suite a second or two, not a run of its own. gRPC and Celery have no HTTP of
their own: the front turns `/grpc` into a call and `/celery` into a task.

Each framework's handler must be a row of the table, named as the application wrote it and in its
file; so must a bare ASGI app's under Hypercorn, a server without a rule (the generic one finds it). A framework that cannot be installed is skipped saying so. 127.0.0.1 only.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, free_port, gilty_command, gilty_env, line_of, one_version
from package_venvs import new_venv, pip_install, venv_python

pytestmark = pytest.mark.interpreter

APPS = REPO / "tests" / "targets" / "framework_apps"
# The releases whose dispatch frames gilty/load/frameworks.py names.
PINS = {
    "aiohttp": "aiohttp==3.14.5",
    "tornado": "tornado==6.6.1",
    "sanic": "sanic==25.12.1",
    "quart": "quart==0.22.0",
    "litestar": "litestar==2.25.0",
    "starlette": "starlette==1.10.0",
    "fastapi": "fastapi==0.165.0",
    "django": "django==6.1.3",
    "flask": "flask==3.1.3",
    "falcon": "falcon==4.4.0",
    "grpc": "grpcio==1.85.3",
    "celery": "celery==5.7.0",
    "uvicorn": "uvicorn==0.54.0",
    "hypercorn": "hypercorn==0.18.0",
}
# framework -> (group, server name in launch.py, path, handler's function, its module)
FRAMEWORKS = {
    "aiohttp": ("async", "aiohttp", "/", "aiohttp_view", "aiohttp_app.py"),
    "tornado": ("async", "tornado", "/", "TornadoView.get", "tornado_app.py"),
    "sanic": ("async", "sanic", "/", "sanic_view", "sanic_app.py"),
    "quart": ("async", "quart", "/", "quart_view", "quart_app.py"),
    "litestar": ("async", "litestar", "/", "litestar_view", "litestar_app.py"),
    "starlette": ("async", "starlette", "/", "starlette_view", "starlette_app.py"),
    "fastapi": ("async", "fastapi", "/", "fastapi_view", "fastapi_app.py"),
    "falcon-asgi": ("async", "falcon-asgi", "/", "FalconAsgiResource.on_get", "falcon_asgi_app.py"),
    "flask": ("sync", "flask", "/", "flask_view", "flask_app.py"),
    "falcon": ("sync", "falcon", "/", "FalconResource.on_get", "falcon_app.py"),
    "django": ("sync", "django", "/", "django_sync_view", "django_app.py"),
    "django-async": ("sync", "django-async", "/async", "django_async_view", "django_app.py"),
    "grpc": ("sync", "grpc", "/grpc", "grpc_view", "grpc_app.py"),
    "celery": ("sync", "celery", "/celery", "celery_job", "celery_app.py"),
    # a bare ASGI app under Hypercorn, which has no rule: the generic one finds the handler
    "generic (hypercorn)": ("sync", "hypercorn", "/", "raw_asgi_app", "generic_app.py"),
}
# the module each framework needs (uvicorn serves the ASGI ones)
IMPORTS = {
    "aiohttp": "aiohttp",
    "tornado": "tornado",
    "sanic": "sanic",
    "quart": "quart,uvicorn",
    "litestar": "litestar,uvicorn",
    "starlette": "starlette,uvicorn",
    "fastapi": "fastapi,uvicorn",
    "flask": "flask",
    "falcon": "falcon",
    "django": "django",
    "django-async": "django,uvicorn",
    "falcon-asgi": "falcon,uvicorn",
    "grpc": "grpc",
    "celery": "celery",
    "generic (hypercorn)": "hypercorn",
}
PER_URL_RATE = 5  # requests per second to each app: ~15 in a 3 s step, 8 ms of CPU each


def _probe(python: str) -> dict:
    """framework -> why it cannot run ("" when it can)."""
    code = (
        "import importlib, json, sys\nout = {}\nfor name, mods in json.loads(sys.argv[1]).items():\n"
        "    try:\n        [importlib.import_module(m) for m in mods.split(',')]\n        out[name] = ''\n"
        "    except Exception as e:\n        out[name] = f'{type(e).__name__}: {e}'\nprint(json.dumps(out))"
    )
    done = subprocess.run([python, "-c", code, json.dumps(IMPORTS)], capture_output=True, text=True, timeout=120)
    return json.loads(done.stdout) if done.returncode == 0 else {name: done.stderr[-200:] for name in IMPORTS}


def _venv(interp) -> tuple:
    """The frameworks' venv and what in it cannot run: all pins at once, else one by one (a package
    without a wheel for this interpreter takes only its framework out)."""
    probe = "import " + ", ".join(sorted({m for mods in IMPORTS.values() for m in mods.split(",")}))
    try:
        python = venv_python(interp, "frameworks", tuple(PINS.values()), probe)
    except pytest.skip.Exception:
        venv = Path(f"/tmp/gilty-frameworks-{interp.version_str}")
        if new_venv(interp.path, venv).returncode != 0:
            pytest.skip(f"cannot make a venv of {interp.id}")
        failed = {}
        for name, pin in PINS.items():
            done = pip_install(venv, pin)
            if done.returncode != 0:
                failed[name] = done.stderr.strip()[-200:]
        python = str(venv / "bin" / "python")
    return python, _probe(python)


@pytest.fixture(scope="module")
def frameworks(interp, tmp_path_factory):
    if interp.path is None:
        pytest.skip(interp.skip_reason)
    one_version(interp, "which frame of a framework calls the handler does not depend on the Python version")
    python, missing = _venv(interp)
    runs: dict = {}

    def run(group: str) -> dict:
        if group not in runs:
            names = [n for n, spec in FRAMEWORKS.items() if spec[0] == group and not missing.get(n)]
            ports = {n: free_port() for n in names}
            front = free_port()
            base = "http://127.0.0.1"
            urls = [f"{base}:{front}/"]
            for n in names:
                _group, server, path, _f, _m = FRAMEWORKS[n]
                urls.append(f"{base}:{front}{path}" if server in ("grpc", "celery") else f"{base}:{ports[n]}{path}")
            servers = [f"{FRAMEWORKS[n][1]}={ports[n]}" for n in names]
            argv = [
                *gilty_command(),
                "load",
                *urls,
                "--rate",
                str(PER_URL_RATE * len(urls)),
                "--duration",
                "3",
                "--warmup",
                "0.5",
                "--format",
                "json",
                *(["--tasks"] if group == "async" else []),
                "--",
                python,
                str(APPS / "launch.py"),
                str(front),
                *servers,
            ]
            env = dict(gilty_env(), FRAMEWORK_CELERY_DIR=str(tmp_path_factory.mktemp("celery")))
            done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
            # gilty's own traceback only: the servers' output shares its stderr, and a Celery worker
            # stopped while polling its broker's folder may print one of its own
            failed = done.returncode != 0 or re.search(r'File "[^"]*/gilty/[^"]*\.py"', done.stderr) is not None
            # a failed run is kept too: each framework's test then fails with it, without a run of its own
            runs[group] = f"exit {done.returncode}: {done.stderr[-3000:]}" if failed else json.loads(done.stdout)
        if isinstance(runs[group], str):
            pytest.fail(runs[group])
        return runs[group]

    return run, missing, python


@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_handler_is_an_endpoint(frameworks, name):
    run, missing, _python = frameworks
    if missing.get(name):
        pytest.skip(f"{name} cannot be installed or imported here: {missing[name]}")
    group, _server, _path, function, module = FRAMEWORKS[name]
    rows = run(group)["steps"][0]["profile"]["endpoints"]
    mine = [e for e in rows if e["function"] == function and e["file"] == str(APPS / module)]
    assert mine, [(e["function"], e["file"]) for e in rows]
    # ~15 requests of 8 ms of CPU each: some tens of milliseconds in the handler at least
    assert mine[0]["total_s"] >= 0.02, mine[0]


def test_aiohttp_requests_tasks_await_the_semaphore_in_the_handler(frameworks):
    run, missing, _python = frameworks
    if missing.get("aiohttp"):
        pytest.skip(f"aiohttp cannot be installed or imported here: {missing['aiohttp']}")
    rows = run("async")["steps"][0]["profile"]["task_endpoints"]
    (mine,) = [e for e in rows if e["function"] == "aiohttp_view"] or [None]
    assert mine is not None and mine["file"] == str(APPS / "aiohttp_app.py"), [(e["function"], e["file"]) for e in rows]
    # the handler's own awaits, at its lines: the semaphore's slot or the sleep inside it
    lines = {line_of("framework_apps/aiohttp_app.py", "acquire"), line_of("framework_apps/aiohttp_app.py", "sleep")}
    assert mine["awaits"] and mine["awaits"][0]["function"] == "aiohttp_view", mine
    assert mine["awaits"][0]["line"] in lines, (mine["awaits"], lines)


@pytest.mark.alone
def test_aiohttp_knee_names_the_semaphore(frameworks):
    """The issue's aiohttp server: two slots of a semaphore held 40 ms each cap it at 50 requests/s.
    Past that the requests queue at the semaphore inside the handler, and the knee must say so (it
    said only "waiting for work ... or the handlers await something")."""
    _run, missing, python = frameworks
    if missing.get("aiohttp"):
        pytest.skip(f"aiohttp cannot be installed or imported here: {missing['aiohttp']}")
    front, port = free_port(), free_port()
    argv = [
        *gilty_command(),
        "load",
        f"http://127.0.0.1:{port}/",
        "--ramp",
        "30:90:30",
        "--slo",
        "p99=300ms",
        "--duration",
        "3",
        "--warmup",
        "0.5",
        "--tasks",
        "--format",
        "json",
        "--",
        python,
        str(APPS / "launch.py"),
        str(front),
        f"aiohttp={port}",
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=dict(gilty_env(), AIOHTTP_SLOT_MS="40", FRAMEWORK_WORK_MS="2")
    )
    assert done.returncode in (0, 10), done.stderr[-3000:]
    report = json.loads(done.stdout)
    knee = report["knee"]
    if knee["rate"] is None:
        pytest.skip(f"the machine is too busy to find this knee: 30 rps already missed the SLO ({knee})")
    # At 60 rps, past the semaphore's 50, the requests' time goes to awaiting its slot, at its line.
    acquire = line_of("framework_apps/aiohttp_app.py", "acquire")
    (mine,) = [e for e in report["steps"][-1]["profile"]["task_endpoints"] if e["function"] == "aiohttp_view"]
    top = mine["awaits"][0]
    assert (top["kind"], top["line"]) == ("semaphore", acquire) and top["share"] >= 0.5, mine
    # The knee names it, unless the host's CPUs are the limit (a busy host: workers runnable without a CPU)
    if knee["limit"] != "host CPU":
        where = f"(aiohttp_app.py:{acquire}, semaphore)"
        assert "requests to `aiohttp_view (aiohttp_app.py)`" in knee["explanation"] and where in knee["explanation"], knee
        assert knee["limit"] == "awaiting a semaphore", knee
