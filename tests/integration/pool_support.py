"""tests/targets/pool_workers.py, a multiprocessing pool whose master prints its and its workers'
pids, started for the memory tests and ended with its whole process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

from conftest import TARGETS


@contextlib.contextmanager
def running_pool(python: str, workers: int, records: str, start: str = ""):
    """Yields (master pid, worker pids) of a pool of ``workers`` that each built ``records`` records,
    started by multiprocessing's ``start`` method (the target's default when empty)."""
    env = dict(os.environ, POOL_WORKERS=str(workers), POOL_RECORDS=records)
    if start:
        env["POOL_START"] = start
    popen = subprocess.Popen(
        [python, str(TARGETS / "pool_workers.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        line = popen.stdout.readline().decode()
        assert line.startswith("pids "), (
            f"pool target: {line!r} {popen.stderr.read().decode()[-2000:] if popen.poll() is not None else ''}"
        )
        master, *pids = (int(x) for x in line.split()[1:])
        yield master, pids
    finally:
        try:
            popen.stdin.close()  # the master exits at the end of its stdin, its workers with it
        except OSError:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                popen.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(popen.pid, sig)
            except ProcessLookupError:
                break
