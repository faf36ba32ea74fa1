"""`gilty load` on third-party applications installed from PyPI, each with a known bottleneck (issue 21,
items 2-4), started by gilty after `--` under gunicorn:

- httpbin (pip-installed into site-packages, as its Docker image has it), `/bytes/N`: Python building
  N random bytes in the view `random_bytes`; the endpoint table and the knee name that view, not
  "(framework)" or random's internals;
- a Django project with its admin (tests/targets/django_site), `/report/`: a slow sqlite query; the
  knee is native code under the view `report`, from the busy workers;
- FastAPI under gunicorn's uvicorn workers (tests/targets/web_app/lazyapp.py), `/block`: an async
  endpoint that imports a large module on its first call in each worker, then blocks the event loop
  in time.sleep; gilty waits until every worker has answered, the knee is the blocked loop under
  `block`, and start-up (importlib, compiling) is never the cause.

A run judges only when the machine let it: the first step met the SLO and the step that missed it
did so by the server's doing (the generator's own delay does not explain it); otherwise it is run
once more, then skipped with what was measured. Each run is a few seconds of load on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import REPO, TARGETS, free_port, gilty_command, gilty_env
from package_venvs import venv_python

TRIES = 2
HTTPBIN_PACKAGES = ("httpbin==0.10.4", "gunicorn==23.0.0")
STARTUP_WORDS = ("importlib", "get_data", "_compile_bytecode", "source_to_code", "__create_fn__", "_load_unlocked")


def _bin(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} is not installed next to {sys.executable} (make setup installs requirements-dev.txt)")
    return str(path)


def _load(urls: list, ramp: str, slo: str, server: list, env: dict, duration: float = 2.0) -> tuple:
    argv = [*gilty_command(), "load", *urls, "--ramp", ramp, "--duration", str(duration), "--slo", slo,
            "--format", "json", "--", *server]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=dict(gilty_env(), **env))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr


def _unclean(run: dict) -> str:
    """Why a ramp cannot judge the server's limit ("" when it can)."""
    knee = run["knee"]
    first = run["steps"][0]
    if knee["rate"] is None:
        return f"already at {first['requested_rate']:g} rps p99 was {first['latency_s']['p99'] * 1e3:.0f} ms"
    if knee["limit"] == "none reached":
        return f"every step up to {run['steps'][-1]['requested_rate']:g} rps met the SLO"
    if knee["limit"] == "generator":  # the step would have met the SLO without the generator's own delay
        gen = run["steps"][-1]["generator"]
        return f"at {run['steps'][-1]['requested_rate']:g} rps the generator fell behind (lag p99 {gen['lag_p99_s'] * 1e3:.1f} ms)"
    return ""


def _judged(make_run) -> tuple:
    why = []
    for _ in range(TRIES):
        run, err = make_run()
        reason = _unclean(run)
        if not reason:
            return run, err
        why.append(reason)
    pytest.skip("the machine is too busy to find this knee: " + "; ".join(why))


def _endpoints(run: dict) -> list:
    return run["steps"][-1]["profile"]["endpoints"]


def test_httpbin_installed_in_site_packages_names_its_view():
    base = types.SimpleNamespace(path=sys._base_executable, version_str=".".join(map(str, sys.version_info[:3])),
                                 id=f"httpbin-{sys.version_info[0]}.{sys.version_info[1]}")
    python = venv_python(base, "httpbin", HTTPBIN_PACKAGES, "import httpbin, gunicorn")
    gunicorn = str(Path(python).parent / "gunicorn")

    def run():
        port = free_port()
        return _load([f"http://127.0.0.1:{port}/bytes/20000"], "10:250:15", "p99=200ms",
                     [gunicorn, "-w", "2", "-b", f"127.0.0.1:{port}", "httpbin:app"], {})

    report, err = _judged(run)
    assert "2 workers answered in" in err, err
    rows = _endpoints(report)
    view = rows[0]
    # before issue 21: "(framework)" 100 % of the server's time, top site Random._randbelow_with_getrandbits
    assert view["function"] == "random_bytes" and view["file"].endswith("site-packages/httpbin/core.py"), rows
    assert view["top_site"].startswith("Random.randint ("), view
    framework = [r for r in rows if r["function"] == "(framework)"]
    assert not framework or framework[0]["total_s"] < view["total_s"], rows
    knee = report["knee"]
    assert knee["limit"] in ("CPU in Python", "GIL contention"), knee
    assert "random_bytes" in knee["explanation"] and "Random.randint" in knee["explanation"], knee["explanation"]
    assert not any(w in knee["explanation"] for w in STARTUP_WORDS), knee["explanation"]


def test_django_slow_sqlite_view_is_native_code_under_the_view(tmp_path):
    gunicorn = _bin("gunicorn")
    pytest.importorskip("django")

    def run():
        port = free_port()
        env = {"DJANGO_SITE_REPORT_ROWS": "60000", "DJANGO_SITE_DB": str(tmp_path / "site.sqlite3")}
        return _load([f"http://127.0.0.1:{port}/report/"], "5:150:10", "p99=300ms",
                     [gunicorn, "-w", "2", "-b", f"127.0.0.1:{port}", "--chdir", str(TARGETS / "django_site"), "site_conf.wsgi"], env)

    report, err = _judged(run)
    assert "2 workers answered in" in err, err
    knee = report["knee"]
    # sqlite runs its query in C without the GIL: the busiest workers' time is native code under the view
    assert knee["limit"] == "native code", knee
    assert "report (" in knee["explanation"] and "shop/views.py" in knee["explanation"], knee["explanation"]
    assert not any(w in knee["explanation"] for w in STARTUP_WORDS), knee["explanation"]
    top = _endpoints(report)[0]
    assert top["function"] == "report" and top["file"].endswith("django_site/shop/views.py"), top
    assert top["seconds"].get("native", 0) >= 0.5 * top["total_s"], top


def _heavy_module(folder: Path) -> str:
    """A module that takes a while to compile from source (no .pyc: the run sets PYTHONDONTWRITEBYTECODE)."""
    body = "\n".join(f"def f{i}(x):\n    y = x * {i}\n    if y > {i}:\n        return [y, {i}, 'a{i}']\n    return {{'k': y, 'n': {i}}}\n"
                     for i in range(40000))
    (folder / "lazy_heavy.py").write_text(body)
    return "lazy_heavy"


def test_fastapi_uvicorn_workers_blocked_loop_not_startup(tmp_path):
    gunicorn = _bin("gunicorn")
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    module = _heavy_module(tmp_path)

    def run():
        port = free_port()
        env = {"LAZYAPP_PATH": str(tmp_path), "LAZYAPP_MODULE": module, "LAZYAPP_BLOCK_S": "0.05", "PYTHONDONTWRITEBYTECODE": "1"}
        return _load([f"http://127.0.0.1:{port}/block"], "10:120:10", "p99=150ms",
                     [gunicorn, "-w", "2", "-k", "uvicorn.workers.UvicornWorker", "-b", f"127.0.0.1:{port}",
                      "--chdir", str(REPO / "tests" / "targets" / "web_app"), "lazyapp:app"], env)

    report, err = _judged(run)
    # every worker answered (and so imported its lazy module) before the first measured step
    assert "2 workers answered in" in err, err
    ready = report["workers_ready"]
    assert ready["complete"] and len(ready["workers"]) == 2 and sorted(ready["answered"]) == sorted(ready["workers"]), ready
    assert ready["seconds"] > 0
    knee = report["knee"]
    assert knee["limit"] == "event loop blocked", knee
    assert "block (" in knee["explanation"] and "lazyapp.py" in knee["explanation"], knee["explanation"]
    assert not any(w in knee["explanation"] for w in STARTUP_WORDS), knee["explanation"]
    for step in report["steps"]:
        p = step["profile"]
        assert all(not any(w in s["function"] for w in STARTUP_WORDS) for s in p["sites"]), p["sites"]
        assert all(not e["function"].endswith("__create_fn__") for e in p["endpoints"]), p["endpoints"]
        for loop in p["loops"]:
            assert not any(w in c["site"] for c in loop["culprits"] for w in STARTUP_WORDS), loop
    # 2 s steps under 100 rps give fewer than 200 answers: the p99 says it is not a percentile
    first = report["steps"][0]["verdict"]
    assert first["few_answers"] and first["answers"] < 200, first
    assert "answers" in knee["explanation"], knee["explanation"]
