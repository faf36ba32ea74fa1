"""``python -m gilty.demo``: start the demo service, record it with gilty, print the diagnosis.

1. starts ``gilty/demo/service.py`` with the newest Python found here (``interpreters``; or
   ``--python``), in its own session (so a Ctrl-C reaches gilty, which still prints its summary,
   and not the service directly);
2. waits for it to print ``ready``;
3. runs ``gilty record --pid PID --duration D --rate R`` in this process, through
   :func:`gilty.cli.main`, which prints the report and the verdict;
4. stops the service (SIGTERM, then SIGKILL), whatever happened, Ctrl-C included.

Exits with gilty's exit status.
"""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from gilty.demo import interpreters

READY_TIMEOUT_S = 15.0
SERVICE = Path(__file__).with_name("service.py")
STOP_TIMEOUT_S = 5.0

INTRO = """\
gilty demo: a task scheduler like the one in "Is it me, or the GIL?" (EuroPython 2019)
  MainThread   hands a task to each I/O worker every 4 ms over a socketpair
  io-1..io-{n}   wait in recv(), make a 1-4 ms blocking "API call", do a little Python
  metrics      aggregates and serialises fake metrics in pure Python, in a loop
  hasher       sha256 of a 16 MiB buffer, in C with the GIL released
The I/O threads should spend their time blocked in I/O. Are they? Recording pid {pid},
Python {version} ({python}), for {duration:g} s at {rate:g} Hz with `gilty record --pid {pid} --duration {duration:g} --rate {rate:g}`...
"""

OUTRO = """\
What to read: the I/O threads spend much of their time in WAIT (waiting for the GIL), not
IDLE (their own blocking calls); the blame section and the verdict say who they wait for:
the 'metrics' thread's pure-Python aggregation. The hasher is busy too, but in NATIVE code
without the GIL, so nobody waits for it. The fix is in the metrics thread (do less,
less often, or out of process), not a rewrite of the I/O path.
"""


def _parse_args(argv: Optional[list]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gilty.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds to record (default 10)")
    parser.add_argument("--rate", type=float, default=1000.0, help="samples per second (default 1000: waits of a few ms need it)")
    parser.add_argument("--io-threads", type=int, default=4, help="I/O worker threads in the service (default 4)")
    parser.add_argument("--python", metavar="PATH", help="the interpreter that runs the service (default: the newest CPython found here)")
    return parser.parse_args(argv)


def start_service(io_threads: int, python: str = sys.executable) -> subprocess.Popen:
    # The file, not `-m gilty.demo.service`: another interpreter has no gilty to import.
    return subprocess.Popen(
        [python, str(SERVICE), "--io-threads", str(io_threads)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_ready(service: subprocess.Popen, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Block until the service prints ``ready``; RuntimeError if it exits or takes too long."""
    assert service.stdout is not None
    deadline = time.monotonic() + timeout_s
    buffered = b""
    with selectors.DefaultSelector() as selector:
        selector.register(service.stdout, selectors.EVENT_READ)
        while b"ready" not in buffered:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"the demo service (pid {service.pid}) did not print 'ready' within {timeout_s:g} s")
            if selector.select(left):
                chunk = os.read(service.stdout.fileno(), 4096)
                if not chunk:
                    raise RuntimeError(f"the demo service exited (status {service.wait()}) before it was ready")
                buffered += chunk


def stop_service(service: subprocess.Popen, timeout_s: float = STOP_TIMEOUT_S) -> Optional[int]:
    """SIGTERM, wait, SIGKILL; always reaps. Returns the exit status."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if service.poll() is not None:
            break
        try:
            service.send_signal(sig)
        except ProcessLookupError:
            break
        try:
            service.wait(timeout_s)
            break
        except subprocess.TimeoutExpired:
            continue
    status = service.wait()
    if service.stdout is not None:
        service.stdout.close()
    return status


def main(argv: Optional[list] = None) -> int:
    args = _parse_args(argv)
    python = interpreters.probe(args.python) if args.python else interpreters.newest()
    if python is None:
        print(f"gilty demo: error: {args.python!r} is not a CPython 3.10+ (non free-threaded) that runs", file=sys.stderr)
        return 2
    service = start_service(args.io_threads, python.path)
    try:
        wait_ready(service)
        intro = INTRO.format(pid=service.pid, version=python.version_str, python=python.path, duration=args.duration, rate=args.rate, n=args.io_threads)
        print(intro, flush=True)
        # Imported here so that `--help` works, and a broken CLI still stops the service.
        from gilty.cli import main as gilty_main

        status = gilty_main(["record", "--pid", str(service.pid), "--duration", f"{args.duration:g}", "--rate", f"{args.rate:g}"])
        sys.stdout.flush()
        if status == 0:
            print()
            print(OUTRO, end="", flush=True)
        return status
    except RuntimeError as e:
        print(f"gilty demo: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gilty demo: interrupted", file=sys.stderr)
        return 130
    finally:
        stop_service(service)


if __name__ == "__main__":
    sys.exit(main())
