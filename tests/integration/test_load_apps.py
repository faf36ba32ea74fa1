"""`gilty load` on third-party applications installed from PyPI, each with a known bottleneck (issue 21,
items 2-4), started by gilty after `--` under gunicorn:

- a Django project with its admin (tests/targets/django_site), `/report/`: a slow sqlite query; the
  knee is native code under the view `report`, from the busy workers;
- FastAPI under gunicorn's uvicorn workers (tests/targets/web_app/lazyapp.py), `/block`: an async
  endpoint that imports a large module on its first call in each worker, then blocks the event loop
  in time.sleep; gilty waits until every worker has answered, the knee is the blocked loop under
  `block`, and start-up (importlib, compiling) is never the cause.

httpbin is in test_load_httpbin.py. A run judges only when the machine let it (load_apps_support.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, TARGETS, free_port
from load_apps_support import STARTUP_WORDS, host_limited, judged, last_endpoints, load_ramp, venv_bin

pytestmark = pytest.mark.alone


def test_django_slow_sqlite_view_is_native_code_under_the_view(tmp_path):
    gunicorn = venv_bin("gunicorn")
    pytest.importorskip("django")

    def run():
        port = free_port()
        env = {"DJANGO_SITE_REPORT_ROWS": "60000", "DJANGO_SITE_DB": str(tmp_path / "site.sqlite3")}
        return load_ramp(
            [f"http://127.0.0.1:{port}/report/"],
            "15:150:10",
            "p99=300ms",
            [gunicorn, "-w", "2", "-b", f"127.0.0.1:{port}", "--chdir", str(TARGETS / "django_site"), "site_conf.wsgi"],
            env,
        )

    report, err = judged(run)
    assert "2 workers answered in" in err, err
    knee = report["knee"]
    # sqlite runs its query in C without the GIL: the busiest workers' time is native code under the view
    assert knee["limit"] == "native code" or host_limited(report), knee
    assert "report (" in knee["explanation"] and "shop/views.py" in knee["explanation"], knee["explanation"]
    assert not any(w in knee["explanation"] for w in STARTUP_WORDS), knee["explanation"]
    top = last_endpoints(report)[0]
    assert top["function"] == "report" and top["file"].endswith("django_site/shop/views.py"), top
    # On a busy host much of it is runnable without a CPU: native code waiting to run, split as the
    # cause is (in proportion to what the view did when it had a CPU).
    seconds = top["seconds"]
    ran = seconds.get("native", 0) + seconds.get("holding_gil", 0)
    native = seconds.get("native", 0) * (1 + seconds.get("cpu_wait", 0) / ran) if ran else 0.0
    assert native >= 0.5 * top["total_s"], top


def _heavy_module(folder: Path) -> str:
    """A module that takes a while to compile from source (no .pyc: the run sets PYTHONDONTWRITEBYTECODE)."""
    body = "\n".join(
        f"def f{i}(x):\n    y = x * {i}\n    if y > {i}:\n        return [y, {i}, 'a{i}']\n    return {{'k': y, 'n': {i}}}\n"
        for i in range(25000)
    )
    (folder / "lazy_heavy.py").write_text(body)
    return "lazy_heavy"


def test_fastapi_uvicorn_workers_blocked_loop_not_startup(tmp_path):
    gunicorn = venv_bin("gunicorn")
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    module = _heavy_module(tmp_path)

    def run():
        port = free_port()
        env = {"LAZYAPP_PATH": str(tmp_path), "LAZYAPP_MODULE": module, "LAZYAPP_BLOCK_S": "0.05", "PYTHONDONTWRITEBYTECODE": "1"}
        return load_ramp(
            [f"http://127.0.0.1:{port}/block"],
            "10:120:10",
            "p99=300ms",
            [
                gunicorn,
                "-w",
                "2",
                "-k",
                "uvicorn.workers.UvicornWorker",
                "-b",
                f"127.0.0.1:{port}",
                "--chdir",
                str(REPO / "tests" / "targets" / "web_app"),
                "lazyapp:app",
            ],
            env,
        )

    report, err = judged(run)
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
