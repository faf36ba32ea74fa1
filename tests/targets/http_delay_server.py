"""HTTP server with a fixed service time, for `gilty load` tests. Usage: PORT DELAY_S threads|serial [STATS_FILE].
threads: one thread per connection, keep-alive. serial: one request at a time (HTTP/1.0, one
connection each), so the server's concurrency is exactly 1. Each answer is one write: split writes
would meet Nagle's algorithm and the client's delayed ACK (40 ms).

The server keeps its own time per request (from the request line read to the answer written: the
delay and what the machine adds to it); `GET /stats` answers them as JSON, {"served_s": [...]}, and
forgets them; when stopped, it writes those it has to STATS_FILE in the same form (for a server that
`gilty load` starts and stops). Timing tests compare the generator's figures with these."""

import http.server
import json
import sys
import time

port, delay, mode = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
stats_file = sys.argv[4] if len(sys.argv) > 4 else None
served = []  # seconds per request since the last /stats; list.append and slicing hold the GIL


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1" if mode == "threads" else "HTTP/1.0"

    def parse_request(self):
        self.received = time.perf_counter()
        return super().parse_request()

    def do_GET(self):
        close = "" if mode == "threads" else "Connection: close\r\n"
        if self.path == "/stats":
            times = served[:]
            del served[:len(times)]
            body = json.dumps({"served_s": times}).encode()
            self.wfile.write(f"{self.protocol_version} 200 OK\r\nContent-Length: {len(body)}\r\n{close}\r\n".encode() + body)
            return
        # The service time counts from the request line read, so Python's parsing is inside it.
        time.sleep(max(0.0, delay - (time.perf_counter() - self.received)))
        self.wfile.write(f"{self.protocol_version} 200 OK\r\nContent-Length: 2\r\n{close}\r\nok".encode())
        served.append(time.perf_counter() - self.received)

    def log_message(self, *args):
        pass


server_class = http.server.ThreadingHTTPServer if mode == "threads" else http.server.HTTPServer
server_class.request_queue_size = 1024
server = server_class(("127.0.0.1", port), Handler)
server.daemon_threads = True
print("ready", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:  # gilty stops a server it started with SIGINT
    pass
if stats_file:
    with open(stats_file, "w") as f:
        json.dump({"served_s": served[:]}, f)
