"""HTTP server whose handler is CPU-bound Python: every request builds URLs with urllib.parse.quote
(about 0.07 ms of Python per call on this machine), so under load its threads hold the GIL nearly all the time.
Usage: PORT [CALLS] (CALLS of build_url's loop per request, default 25), or --calls-for MS: how many
calls take MS milliseconds of CPU on this machine (tests size the server's work by it)."""

import http.server
import sys
import urllib.parse

CALLS = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] != "--calls-for" else 25
PARTS = [f"segment {i}/with spaces & symbols?" for i in range(40)]


def build_url(n):
    out = []
    for _ in range(n):
        out.append("/".join(urllib.parse.quote(p) for p in PARTS))  # LINE:build_url
    return out


def calls_for(ms: float) -> int:
    import time

    # CPU time, not wall time: on a busy host the wall clock counts the time other jobs had the CPU,
    # and a server sized by it does a fraction of the work meant (2.8 ms, not 10, beside 8 CPU hogs).
    build_url(20)
    t0 = time.thread_time()
    build_url(100)
    per_call = max(time.thread_time() - t0, 1e-6) / 100
    return max(1, round(ms / 1000 / per_call))


if sys.argv[1] == "--calls-for":
    print(calls_for(float(sys.argv[2])), flush=True)
    sys.exit(0)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        build_url(CALLS)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
print("ready", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:  # gilty stops a server it started with SIGINT
    pass
