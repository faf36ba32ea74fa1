"""`python -m gilty.demo.web` (make demo's second part): one `gilty load --ramp` run over the FastAPI demo
service finds a knee and names each of its three problems: the blocking call in the async endpoint
(event-loop lag charged to call_pricing_api), the CPU-bound URL building (GIL held under quote in
search) and the logging thread (GIL held outside any request)."""

from __future__ import annotations

import importlib.util
import subprocess

import pytest

from conftest import REPO, gilty_env

VPY = REPO / ".venv" / "bin" / "python"


@pytest.mark.skipif(not VPY.exists(), reason="no .venv (make setup)")
def test_web_demo_names_each_cause():
    probe = subprocess.run([str(VPY), "-c", "import fastapi, uvicorn"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("fastapi/uvicorn not in .venv (requirements-dev.txt; make setup)")
    done = subprocess.run([str(VPY), "-m", "gilty.demo.web"], capture_output=True, text=True, timeout=120, env=gilty_env())
    assert done.returncode == 0, done.stderr
    out = done.stdout
    lines = out.splitlines()
    knee = next(line for line in lines if line.startswith("Knee:"))
    # the blocking call: the loop's lag, charged to the sleeping function
    loops = [line for line in lines if "MainThread: at its selector" in line]
    assert loops and any("call_pricing_api" in line and "blocked: sleep" in line for line in loops), loops
    # the logging thread, outside any request
    assert any(line.strip().startswith("pid ") and "audit-logger: holds the GIL" in line for line in lines), out
    # the knee's words name both, unless the generator itself fell behind first (then the server's
    # limit is not measured: a machine busy with other jobs)
    if "limit: generator" not in knee:
        assert "call_pricing_api" in knee and "audit-logger" in knee, knee
    # the CPU-bound URL building: the search endpoint holds the GIL under quote()
    search = next(line for line in out.splitlines() if line.strip().startswith("search (web_service.py)"))
    assert "quote (" in search, search
