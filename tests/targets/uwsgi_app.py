"""A WSGI app for uWSGI: every request spins in serve_request() for 50 ms."""
import time


def serve_request(seconds):
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:  # LINE:serve_request
        pass


def application(environ, start_response):
    serve_request(0.05)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]
