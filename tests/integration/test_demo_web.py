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
    knee = next(line for line in out.splitlines() if line.startswith("Knee:"))
    assert "rps" in knee
    # the blocking call: the loop's lag, charged to the sleeping function (in the knee's words too)
    assert "call_pricing_api" in knee and "blocked: sleep" in knee, knee
    # the logging thread, outside any request
    assert "audit-logger" in knee and "outside any request" in knee, knee
    # the CPU-bound URL building: the search endpoint holds the GIL under quote()
    search = next(line for line in out.splitlines() if line.strip().startswith("search (web_service.py)"))
    assert "quote (" in search, search
