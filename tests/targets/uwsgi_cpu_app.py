"""A WSGI app for uWSGI whose every request is CPU-bound Python: CALLS rounds of URL quoting (the
UWSGI_CPU_CALLS environment variable, default 25; about 0.2 ms of CPU a round on this machine)."""
import os
import urllib.parse

CALLS = int(os.environ.get("UWSGI_CPU_CALLS", "25"))
PARTS = [f"segment {i}/with spaces & symbols?" for i in range(40)]


def render_quote(n):
    out = []
    for _ in range(n):
        out.append("/".join(urllib.parse.quote(p) for p in PARTS))  # LINE:render_quote
    return out


def application(environ, start_response):
    render_quote(CALLS)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]
