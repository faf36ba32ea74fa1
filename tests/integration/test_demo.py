"""`python -m gilty.demo` end to end: it records the bundled service, blames 'metrics', and cleans up."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from conftest import INTERPRETERS


def _alive(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="gilty samples Linux processes")
def test_demo_blames_the_metrics_thread_and_stops_the_service():
    result = subprocess.run(
        [sys.executable, "-m", "gilty.demo", "--duration", "3"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output

    pids = re.findall(r"Recording pid (\d+)", result.stdout)
    assert pids, output
    service_pid = int(pids[0])
    # Issue 28: the service runs on the newest interpreter the suite found (sid's 3.15 when unpacked),
    # and says which.
    newest = max((i for i in INTERPRETERS if i.path), key=lambda i: i.version)
    assert f"Python {newest.version_str} ({newest.path})" in result.stdout, output

    verdict = result.stdout.split("\nVerdict\n", 1)
    assert len(verdict) == 2, output
    verdict_text = verdict[1].split("\n\n", 1)[0]
    assert "metrics" in verdict_text, output
    # Named as a thread ('metrics', quoted), not only via aggregate_metrics(); and named first:
    # the verdict opens with the thread that holds the GIL while the others wait.
    assert "'metrics'" in verdict_text, output
    # On a saturated host the verdict may open with "CPU starved: ..." (docs/states.md: when a thread
    # loses more time to the CPU than any loses to the GIL); that sentence ranks threads by their CPU
    # wait, so the GIL verdict is read after it.
    gil_verdict = re.sub(r"CPU starved:.*?that time is neither GIL contention nor native code\.", "", verdict_text, flags=re.S)
    first_thread = re.search(r"'([^']+)'", gil_verdict)
    assert first_thread is not None and first_thread.group(1) == "metrics", output

    deadline = time.monotonic() + 5
    while _alive(service_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(service_pid), f"demo service pid {service_pid} still running"
