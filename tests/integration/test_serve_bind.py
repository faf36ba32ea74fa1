"""Where `gilty serve` listens (issue 30): an empty --bind listened on every interface without a word;
it is refused, and an address other hosts can reach is said on stderr."""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import assert_one_error_line, free_port, gilty_command, gilty_env, run_gilty


def test_an_empty_bind_is_refused_at_once():
    for empty in ("", " "):
        started = time.monotonic()
        rc, _out, err = run_gilty("serve", "--pid", os.getpid(), "--bind", empty, "--port", free_port(), timeout=20)
        assert rc == 2, err
        assert "--bind" in assert_one_error_line(err)
        assert time.monotonic() - started < 10


def _serve_lines(targets, bind: str) -> list:
    """stderr lines of `gilty serve --bind BIND` up to its "serving metrics" line, after one scrape
    over loopback; then it is stopped."""
    target = targets(sys.executable, "sleeper.py")
    port = free_port()
    serve = subprocess.Popen(
        gilty_command() + ["serve", "--pid", str(target.pid), "--bind", bind, "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=gilty_env(),
        # Unbuffered: a buffered reader can hold the "serving" line after the warning's readline,
        # and select() then waits on an empty pipe until the deadline (CI saw it once).
        bufsize=0,
    )
    lines: list = []
    try:
        deadline = time.monotonic() + 30
        with selectors.DefaultSelector() as sel:
            sel.register(serve.stderr, selectors.EVENT_READ)
            while time.monotonic() < deadline and not any("serving metrics" in line for line in lines):
                if sel.select(max(deadline - time.monotonic(), 0)):
                    line = serve.stderr.readline().decode("utf-8", "replace")
                    if not line:
                        break
                    lines.append(line.rstrip("\n"))
        host = "[::1]" if ":" in bind else "127.0.0.1"
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
            assert r.status == 200
    finally:
        serve.terminate()
        serve.wait(10)
        serve.stderr.close()
    assert any("serving metrics" in line for line in lines), lines
    return lines


@pytest.mark.parametrize("bind", ["0.0.0.0", "::"])
def test_a_bind_other_hosts_reach_is_said(targets, bind):
    if ":" in bind and not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    warnings = [line for line in _serve_lines(targets, bind) if line.startswith("gilty: warning:")]
    assert len(warnings) == 1 and bind in warnings[0] and "loopback" in warnings[0], warnings


def test_loopback_is_not_warned_about(targets):
    assert not [line for line in _serve_lines(targets, "127.0.0.1") if "warning" in line]
