"""`python -m gilty.demo.web` (make demo's second part): one `gilty load --ramp` run over the FastAPI demo
service finds a knee and names each of its three problems: the blocking call in the async endpoint
(event-loop lag charged to call_pricing_api), the CPU-bound URL building (GIL held under quote in
search) and the logging thread (GIL held outside any request)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from conftest import REPO, gilty_env

pytestmark = pytest.mark.alone

VPY = REPO / ".venv" / "bin" / "python"
# Other jobs using this much CPU (a quarter of a 2-CPU machine) starve the demo's threads.
BUSY_OTHERS_CPUS = 0.5


class OthersCpu:
    """CPU used by everything but this test's children over an interval: the machine's busy time
    (/proc/stat) minus what the children it waited for used (os.times)."""

    def __init__(self) -> None:
        self.start = (self._busy_s(), self._children_s(), time.monotonic())

    @staticmethod
    def _busy_s() -> float:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        idle = ticks[3] + ticks[4]  # idle, iowait
        return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # guest time is inside user

    @staticmethod
    def _children_s() -> float:
        t = os.times()
        return t.children_user + t.children_system

    def cpus(self) -> float:
        busy, children, started = self.start
        return ((self._busy_s() - busy) - (self._children_s() - children)) / (time.monotonic() - started)


@pytest.mark.skipif(not VPY.exists(), reason="no .venv (make setup)")
def test_web_demo_names_each_cause():
    probe = subprocess.run([str(VPY), "-c", "import fastapi, uvicorn"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("fastapi/uvicorn not in .venv (requirements-dev.txt; make setup)")
    others = OthersCpu()
    done = subprocess.run([str(VPY), "-m", "gilty.demo.web"], capture_output=True, text=True, timeout=120, env=gilty_env())
    others_cpus = others.cpus()
    assert done.returncode == 0, done.stderr
    out = done.stdout
    lines = out.splitlines()
    knee = next(line for line in lines if line.startswith("Knee:"))
    # the blocking call: the loop's lag, charged to the sleeping function
    loops = [line for line in lines if "MainThread: at its selector" in line]
    assert loops and any("call_pricing_api" in line and "blocked: sleep" in line for line in loops), loops
    # The logging thread, outside any request. It sleeps 2 ms every 10 records: when other jobs hold
    # the CPUs, its wake-ups come late and it truly holds the GIL under the 10 % threshold (the demo is
    # right about that machine); that is measured here, as the CPU other jobs used during the demo.
    named = any(line.strip().startswith("pid ") and "audit-logger: holds the GIL" in line for line in lines)
    print(f"audit-logger named: {named}; other jobs used {others_cpus:.2f} of {os.cpu_count()} CPUs during the demo")
    if not named and others_cpus >= BUSY_OTHERS_CPUS:
        pytest.skip(
            f"other jobs used {others_cpus:.2f} CPUs during the demo: the audit-logger got too little CPU to hold "
            f"the GIL 10 % of its time, so the demo rightly did not name it"
        )
    assert named, out
    # the knee's words name both, unless the generator itself fell behind first (then the server's
    # limit is not measured: a machine busy with other jobs)
    if "limit: generator" not in knee:
        assert "call_pricing_api" in knee and "audit-logger" in knee, knee
    # the CPU-bound URL building: the search endpoint holds the GIL under quote()
    search = next(line for line in out.splitlines() if line.strip().startswith("search (web_service.py)"))
    assert "quote (" in search, search
