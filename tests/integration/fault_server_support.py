"""`gilty memory` on tests/targets/fault_server.py, whose two workers copy their master's pages in
`touch_prices` and then, 0.1 s later, in a full collection (`collect_all`), each printing what the
kernel counted of both: the run the fault and memory-page tests read."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from typing import Optional

from conftest import TARGETS
from test_memory import run_memory


@contextlib.contextmanager
def fault_server_run(python: str, extra: tuple, env: Optional[dict] = None):
    """Yields (rc, report, stderr, the workers' own counts, master pid, worker pids) of `gilty memory
    EXTRA` on the fault server, stopped once the workers are done; the server ends with the block."""
    popen = subprocess.Popen(
        [python, str(TARGETS / "fault_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=dict(os.environ, **(env or {})),
    )
    try:
        line = popen.stdout.readline()
        assert line.startswith("pids "), f"fault server: {line!r}"
        master, *workers = (int(x) for x in line.split()[1:])

        def go():
            popen.stdin.write("go\n")
            popen.stdin.flush()
            return [json.loads(popen.stdout.readline()) for _ in workers]

        rc, report, err, results = run_memory(master, 20.0, action=go, extra=extra, stop_after_action_s=1.5)
        yield rc, report, err, results, master, workers
    finally:
        try:
            popen.stdin.write("end\n")
            popen.stdin.close()
        except OSError:
            pass
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
