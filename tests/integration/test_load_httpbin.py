"""`gilty load` on httpbin 0.10.4 installed from PyPI into site-packages (as its Docker image has it),
under gunicorn's sync workers started by gilty after `--` (issue 21, items 2 and 4):

- `/bytes/N`: Python building N random bytes in the view `random_bytes`; the endpoint table and the
  knee name that view and `Random.randint` called from it, not "(framework)" or random's internals;
- `/delay/0.1`: the view sleeps; too few requests are served at once, named in the view (not a
  dependency wait, not waiting for work).

httpbin gets a venv of its own (made once under /tmp): its greenlet<3 pin on Python < 3.12 conflicts
with Locust's gevent in requirements-dev.txt. Runs are judged as in load_apps_support.py.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

from conftest import free_port
from load_apps_support import STARTUP_WORDS, host_limited, judged, last_endpoints, load_ramp
from package_venvs import venv_python

HTTPBIN_PACKAGES = ("httpbin==0.10.4", "gunicorn==23.0.0")


def _httpbin_base():
    """The interpreter under the test run's venv: httpbin gets a venv of its own (see requirements-dev.txt)."""
    return types.SimpleNamespace(
        path=getattr(sys, "_base_executable", sys.executable),
        version_str=".".join(map(str, sys.version_info[:3])),
        id=f"httpbin-{sys.version_info[0]}.{sys.version_info[1]}",
    )


def test_httpbin_installed_in_site_packages_names_its_view():
    python = venv_python(_httpbin_base(), "httpbin", HTTPBIN_PACKAGES, "import httpbin, gunicorn")
    gunicorn = str(Path(python).parent / "gunicorn")

    def run():
        port = free_port()
        return load_ramp(
            [f"http://127.0.0.1:{port}/bytes/20000"],
            "25:250:15",
            "p99=200ms",
            [gunicorn, "-w", "2", "-b", f"127.0.0.1:{port}", "httpbin:app"],
            {},
        )

    report, err = judged(run)
    assert "2 workers answered in" in err, err
    rows = last_endpoints(report)
    view = rows[0]
    # before issue 21: "(framework)" 100 % of the server's time, top site Random._randbelow_with_getrandbits
    assert view["function"] == "random_bytes" and view["file"].endswith("site-packages/httpbin/core.py"), rows
    assert view["top_site"].startswith("Random.randint ("), view
    framework = [r for r in rows if r["function"] == "(framework)"]
    assert not framework or framework[0]["total_s"] < view["total_s"], rows
    knee = report["knee"]
    assert knee["limit"] in ("CPU in Python", "GIL contention") or host_limited(report), knee
    assert "random_bytes" in knee["explanation"] and "Random.randint" in knee["explanation"], knee["explanation"]
    assert not any(w in knee["explanation"] for w in STARTUP_WORDS), knee["explanation"]


def test_httpbin_delay_is_too_few_requests_at_once_in_the_view():
    # /delay/0.1 sleeps in the view: two sync workers serve at most 20 requests a second. The workers
    # sleep inside their requests (concurrency), which is not waiting for work nor a dependency.
    python = venv_python(_httpbin_base(), "httpbin", HTTPBIN_PACKAGES, "import httpbin, gunicorn")
    gunicorn = str(Path(python).parent / "gunicorn")

    def run():
        port = free_port()
        # --app says httpbin is the application's code (the /bytes test finds the view without it)
        return load_ramp(
            [f"http://127.0.0.1:{port}/delay/0.1"],
            "10:60:10",
            "p99=500ms",
            [gunicorn, "-w", "2", "-b", f"127.0.0.1:{port}", "httpbin:app"],
            {},
            extra=("--app", "httpbin"),
        )

    report, _err = judged(run)
    knee = report["knee"]
    assert knee["limit"] == "concurrency", knee
    assert "sleep" in knee["explanation"] and "delay_response" in knee["explanation"], knee["explanation"]
    view = last_endpoints(report)[0]
    # before issue 21 the view had no row: its sleep was idle time of "(framework)", left out
    assert view["function"] == "delay_response" and view["file"].endswith("site-packages/httpbin/core.py"), view
    assert view["seconds"].get("idle", 0) >= 0.8 * view["total_s"], view
