"""Shared by the load tests on third-party applications (test_load_apps.py, test_load_httpbin.py): a
profiled `gilty load --ramp` run of a server command, and whether the machine let it judge the knee."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import gilty_command, gilty_env

TRIES = 2
STARTUP_WORDS = ("importlib", "get_data", "_compile_bytecode", "source_to_code", "__create_fn__", "_load_unlocked")


def venv_bin(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} is not installed next to {sys.executable} (make setup installs requirements-dev.txt)")
    return str(path)


def load_ramp(urls: list, ramp: str, slo: str, server: list, env: dict, duration: float = 2.0, extra: tuple = ()) -> tuple:
    argv = [
        *gilty_command(),
        "load",
        *urls,
        "--ramp",
        ramp,
        "--duration",
        str(duration),
        "--slo",
        slo,
        *extra,
        "--format",
        "json",
        "--",
        *server,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=dict(gilty_env(), **env))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr


def unclean(run: dict) -> str:
    """Why a ramp cannot judge the server's limit ("" when it can)."""
    knee = run["knee"]
    first = run["steps"][0]
    if knee["rate"] is None:
        return f"already at {first['requested_rate']:g} rps p99 was {first['latency_s']['p99'] * 1e3:.0f} ms"
    if knee["limit"] == "none reached":
        return f"every step up to {run['steps'][-1]['requested_rate']:g} rps met the SLO"
    if knee["limit"] == "generator":  # the step would have met the SLO without the generator's own delay
        gen = run["steps"][-1]["generator"]
        return (
            f"at {run['steps'][-1]['requested_rate']:g} rps the generator fell behind (lag p99 {gen['lag_p99_s'] * 1e3:.1f} ms)"
        )
    return ""


def judged(make_run) -> tuple:
    why = []
    for _ in range(TRIES):
        run, err = make_run()
        reason = unclean(run)
        if not reason:
            return run, err
        why.append(reason)
    pytest.skip("the machine is too busy to find this knee: " + "; ".join(why))


def last_endpoints(run: dict) -> list:
    return run["steps"][-1]["profile"]["endpoints"]


def host_limited(run: dict) -> bool:
    """The knee names the host (or the cgroup's quota) as the limit, and the step's own figures agree:
    its busiest workers were held off a CPU at least half of the time they had work (issue 31, item 1).
    On a machine other jobs keep busy that is the true limit of a CPU-bound server."""
    knee, profile = run["knee"], run["steps"][-1]["profile"]
    return knee["limit"] in ("host CPU", "CPU quota") and bool(profile) and profile["cpu_starved_passes"] >= 0.5
