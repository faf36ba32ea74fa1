"""``python -m gilty.demo.web``: load the web demo service (gilty/demo/web_service.py, FastAPI on uvicorn)
with a stepped open-loop ramp while profiling it, and print what limits it.

Runs ``gilty load URL... --ramp FROM:TO:STEP --slo p99=100ms -- python -m uvicorn gilty.demo.web_service:app``
through :func:`gilty.cli.main`: gilty starts the server, waits until it answers, steps the rate up until
p99 exceeds the SLO, samples the server on the same clock, stops it. Needs fastapi and uvicorn
(requirements-dev.txt installs them).
"""

from __future__ import annotations

import argparse
import importlib.util
import socket
import sys
from typing import Optional

INTRO = """\
gilty web demo: a FastAPI service with three problems
  /price    async endpoint calling a blocking "pricing API" (time.sleep 20 ms)
  /search   CPU-bound URL building (urllib.parse.quote) in a sync endpoint
  audit-logger  a thread formatting log records in a loop, holding the GIL
  /health   answers at once
Loading it with `gilty load ... --ramp {ramp} --duration {duration:g} --slo p99=100ms -- python -m uvicorn ...`:
"""

OUTRO = """\
What to read: the knee and its limit; the event loop's lag spans charged to call_pricing_api (blocked
in a sleep inside an async endpoint: use an async client or run it in a thread); /search's time is GIL
held under quote() called from build_result_urls (cache or precompute); the audit-logger holds the GIL
outside any request (log less, or hand records to a QueueHandler).
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gilty.demo.web", description=__doc__.splitlines()[0])
    parser.add_argument("--ramp", default="20:200:30", help="FROM:TO:STEP in requests per second (default 20:200:30)")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per step (default 2)")
    args = parser.parse_args(argv)
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"gilty web demo: error: needs {' and '.join(missing)} (pip install fastapi uvicorn)", file=sys.stderr)
        return 2
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    print(INTRO.format(ramp=args.ramp, duration=args.duration), flush=True)
    from gilty.cli import main as gilty_main

    status = gilty_main([
        "load", f"{base}/price", f"{base}/search", f"{base}/health@2",
        "--ramp", args.ramp, "--duration", f"{args.duration:g}", "--slo", "p99=100ms", "--warmup", "1",
        "--", sys.executable, "-m", "uvicorn", "gilty.demo.web_service:app", "--port", str(port), "--log-level", "warning",
    ])
    sys.stdout.flush()
    if status == 0:
        print()
        print(OUTRO, end="", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
