"""An asyncio loop's time away from its selector in every report (issue 31, item 3): built from
synthetic passes of a loop thread that blocks in a `requests` call from its handler 80 % of the time,
the verdict leads with it and names the handler's line, and the JSON report's `event_loops` carries
the documented keys. A loop at rest and a process without a loop leave the verdict alone."""

from __future__ import annotations

import json

from gilty.report.recording import json as json_report
from gilty.report.recording import text as console
from gilty.sampling.analysis import summarise
from synthetic import EPOLL_WAIT, IDLE, RECVFROM, BatchBuilder, contention_session, make_session
from test_json_report import documented_keys, key_paths

LIB = "/usr/lib/python3.12"
RUN_ONCE = ("BaseEventLoop._run_once", f"{LIB}/asyncio/base_events.py", 1949)
FOREVER = ("BaseEventLoop.run_forever", f"{LIB}/asyncio/base_events.py", 641)


def _loop_session(blocked: int, at_rest: int, cycles: int = 40):
    b = BatchBuilder(names={1: "MainThread"})
    rest = b.stack(("EpollSelector.select", f"{LIB}/selectors.py", 468), RUN_ONCE, FOREVER)
    block = b.stack(
        ("SocketIO.readinto", f"{LIB}/socket.py", 707),
        ("get", "/venv/lib/python3.12/site-packages/requests/api.py", 73),
        ("fetch_price", "/srv/server.py", 10),
        ("Handle._run", f"{LIB}/asyncio/events.py", 84),
        RUN_ONCE,
        FOREVER,
    )
    passes = ([{1: (IDLE, block, RECVFROM)}] * blocked + [{1: (IDLE, rest, EPOLL_WAIT)}] * at_rest) * cycles
    return make_session([b.batch(passes)])


def test_a_blocked_loop_leads_the_verdict_with_the_handlers_line():
    summary = summarise(_loop_session(blocked=8, at_rest=2))
    assert summary.verdict.kinds[0] == "event_loop_blocked", summary.verdict
    text = summary.verdict.text
    assert text.startswith("Event loop blocked: the event loop of MainThread (tid 1) was away from its selector 8"), text
    assert "get (requests/api.py) called from fetch_price (server.py:10), blocked: I/O wait" in text, text
    # The rest of the verdict follows; blocked inside a handler is not "mostly idle".
    assert "No GIL contention" in text
    assert "mostly idle" not in text and "idle" not in summary.verdict.kinds, text


def test_the_text_report_has_a_section_per_loop():
    text = console.render(_loop_session(blocked=8, at_rest=2))
    section = [ln for ln in text.splitlines() if ln.startswith("Event loop of ")]
    assert len(section) == 1 and "away from its selector 8" in section[0] and "spans over 20 ms (up to 80 ms)" in section[0], text


def test_json_event_loops_match_the_documentation():
    report = json.loads(json_report.render(_loop_session(blocked=8, at_rest=2)))
    loops = report["event_loops"]
    assert len(loops) == 1 and loops[0]["tid"] == 1 and 0.75 <= loops[0]["away_share"] <= 0.85, loops
    assert loops[0]["culprits"][0]["caller"] == "fetch_price (/srv/server.py:10)", loops
    present = key_paths({"event_loops": loops}) - {"event_loops"}
    documented = documented_keys("Event loops (`event_loops`)")
    assert present == documented, (present - documented, documented - present)
    assert report["verdict"].startswith("Event loop blocked"), report["verdict"]


def test_a_loop_at_rest_is_listed_and_leaves_the_verdict_alone():
    session = _loop_session(blocked=0, at_rest=10)
    summary = summarise(session)
    assert "event_loop_blocked" not in summary.verdict.kinds and "Event loop" not in summary.verdict.text
    loops = json.loads(json_report.render(session))["event_loops"]
    assert len(loops) == 1 and loops[0]["away_share"] == 0 and loops[0]["spans"] == 0, loops


def test_no_loop_no_word_of_one():
    session, _ = contention_session()
    assert json.loads(json_report.render(session))["event_loops"] == []
    assert "Event loop" not in console.render(session)
