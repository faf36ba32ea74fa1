"""Per-endpoint attribution and event-loop lag on recordings built pass by pass (tests/unit/synthetic.py):
the handler under each framework's dispatch frame, and lag spans found, measured and charged."""

from __future__ import annotations

from gilty.load.endpoints import FRAMEWORK, endpoint_table, handler_frame
from gilty.load.eventloop import loop_lags, loop_threads
from gilty.sampling.session import NO_STACK as NO_STACK_ID
from synthetic import CLOCK_NANOSLEEP, CPU_WAIT, EPOLL_WAIT, HOLD, IDLE, WAIT, BatchBuilder, make_session

SITE = "/venv/lib/python3.12/site-packages"
STDLIB = "/usr/lib/python3.12"  # synthetic.target()'s executable is /usr/bin/python3.12
PREFIXES = (f"{STDLIB}/",)


def test_handler_under_each_framework():
    app = ("view", "/srv/app/views.py", 10)
    cases = {
        "flask": [("Flask.dispatch_request", f"{SITE}/flask/app.py", 880)],
        "django": [
            ("_view_wrapper", f"{SITE}/django/views/decorators/csrf.py", 65),
            ("BaseHandler._get_response", f"{SITE}/django/core/handlers/base.py", 197),
        ],
        "fastapi": [("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212)],
        "stdlib": [("BaseHTTPRequestHandler.handle_one_request", f"{STDLIB}/http/server.py", 424)],
        "gunicorn": [("SyncWorker.handle_request", f"{SITE}/gunicorn/workers/sync.py", 177)],
    }
    for name, outer in cases.items():
        # innermost first: a library call inside the view, the view, then the framework's frames
        stack = [("quote", f"{STDLIB}/urllib/parse.py", 893), app, *outer, ("main", f"{SITE}/server.py", 1)]
        assert handler_frame(stack, PREFIXES) == app, name
    # a decorator from a library between the dispatch and the view is looked through
    wrapped = [app, ("wrapper", f"{SITE}/lib/deco.py", 5), ("Flask.dispatch_request", f"{SITE}/flask/app.py", 880)]
    assert handler_frame(wrapped, PREFIXES) == app
    # in the framework, before the handler: the framework row; outside any dispatch: nothing
    assert (
        handler_frame(
            [
                ("solve_dependencies", f"{SITE}/fastapi/dependencies/utils.py", 600),
                ("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212),
            ],
            PREFIXES,
        )
        == FRAMEWORK
    )
    assert handler_frame([app, ("main", "/srv/app/main.py", 3)], PREFIXES) is None


def _loop_recording():
    """MainThread runs an asyncio loop at 100 Hz: mostly at its selector, blocked twice in a 50 ms
    time.sleep inside an async endpoint and once for 20 ms running Python; a pool thread runs the
    CPU-bound sync endpoint meanwhile."""
    b = BatchBuilder(names={1: "MainThread", 2: "AnyIO worker thread"})
    base = [
        ("BaseEventLoop._run_once", f"{STDLIB}/asyncio/base_events.py", 1884),
        ("BaseEventLoop.run_forever", f"{STDLIB}/asyncio/base_events.py", 607),
    ]
    select = b.stack(("EpollSelector.select", f"{STDLIB}/selectors.py", 468), *base)
    dispatch = ("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212)
    block = b.stack(("block", "/srv/app.py", 34), dispatch, *base)
    busy = b.stack(("parse", "/srv/app.py", 50), ("fast", "/srv/app.py", 48), dispatch, *base)
    urls = b.stack(
        ("quote", f"{STDLIB}/urllib/parse.py", 893),
        ("urls", "/srv/app.py", 40),
        ("WorkerThread.run", f"{SITE}/anyio/_backends/_asyncio.py", 1124),
    )
    plan = (
        [(IDLE, select, EPOLL_WAIT)] * 20
        + [(IDLE, block, CLOCK_NANOSLEEP)] * 5
        + [(IDLE, select, EPOLL_WAIT)] * 20
        + [(HOLD, busy)] * 2
        + [(IDLE, select, EPOLL_WAIT)] * 10
        + [(IDLE, block, CLOCK_NANOSLEEP)] * 5
        + [(WAIT, select)] * 1
        + [(IDLE, select, EPOLL_WAIT)] * 37
    )
    passes = [{1: state, 2: (HOLD, urls)} for state in plan]
    return make_session([b.batch(passes[:50]), b.batch(passes[50:])])


def test_loop_lag_spans_and_their_culprit():
    session = _loop_recording()
    assert loop_threads(session) == [1]
    (lag,) = loop_lags([session], threshold_s=0.03)
    assert lag.thread == "MainThread" and lag.pid == session.target.pid
    # two spans of 5 passes (plus one waiting for the GIL at the selector: 6) at 10 ms a pass;
    # the 20 ms of Python is under the threshold
    assert lag.spans == 2
    assert abs(lag.lag_s - 0.11) < 1e-6 and abs(lag.max_span_s - 0.06) < 1e-6
    assert lag.at_rest == 87 / 100
    top = lag.culprits[0]
    assert top.site == "block (/srv/app.py:34)" and top.doing == "blocked: sleep (clock_nanosleep)"
    assert abs(top.seconds - 0.10) < 1e-6
    assert lag.culprits[1].doing == "waiting for the GIL"
    # a lower threshold catches the Python stretch too
    (lag,) = loop_lags([session], threshold_s=0.015)
    assert lag.spans == 3 and any(c.site.startswith("parse (") for c in lag.culprits)


def test_endpoint_table_by_state():
    session = _loop_recording()
    rows = {e.function: e for e in endpoint_table([session])}
    assert set(rows) == {"urls", "block", "fast"}
    assert abs(rows["urls"].total_s - 1.0) < 1e-6 and rows["urls"].share_holding == 1.0
    assert rows["urls"].top_site == f"quote ({STDLIB}/urllib/parse.py)"
    assert abs(rows["block"].seconds["idle"] - 0.10) < 1e-6 and rows["block"].share_holding == 0.0
    assert rows["fast"].top_site == "parse (/srv/app.py:50)"


def test_background_threads_outside_requests():
    from gilty.load.endpoints import background_threads

    b = BatchBuilder(names={1: "MainThread", 2: "audit-logger", 3: "AnyIO worker thread"})
    fmt = b.stack(("Formatter.format", f"{STDLIB}/logging/__init__.py", 700), ("log_forever", "/srv/app.py", 60))
    urls = b.stack(("urls", "/srv/app.py", 40), ("WorkerThread.run", f"{SITE}/anyio/_backends/_asyncio.py", 1124))
    passes = [
        {1: (IDLE, NO_STACK_ID), 2: (HOLD if i % 2 else WAIT, fmt), 3: (HOLD if i % 2 == 0 else WAIT, urls)} for i in range(50)
    ]
    session = make_session([b.batch(passes)])
    found = background_threads([session], set())
    # the handler thread holds the GIL half the time too, but inside a request: not background
    assert [t.thread for t in found] == ["audit-logger"]
    assert found[0].share_holding == 0.5
    assert found[0].top_site == f"Formatter.format ({STDLIB}/logging/__init__.py)"
    assert background_threads([session], {(session.target.pid, 2)}) == []


def test_a_cpu_bound_callback_is_charged_though_its_stretch_began_in_the_loop():
    # One stretch holding the GIL: its first sample is in `_run_once` itself, the next nine in the
    # endpoint's URL building. Runs keep the first stack; the culprit must still be the endpoint's code.
    b = BatchBuilder(names={1: "MainThread"})
    base = [("BaseEventLoop._run_once", f"{STDLIB}/asyncio/base_events.py", 1884)]
    select = b.stack(("EpollSelector.select", f"{STDLIB}/selectors.py", 468), *base)
    loop_code = b.stack(*base)
    cpu = b.stack(
        ("quote", f"{STDLIB}/urllib/parse.py", 893),
        ("build_url", "/srv/app.py", 28),
        ("cpu", "/srv/app.py", 60),
        ("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212),
        *base,
    )
    plan = [(IDLE, select, EPOLL_WAIT)] * 10 + [(HOLD, loop_code)] + [(HOLD, cpu)] * 9 + [(IDLE, select, EPOLL_WAIT)] * 10
    (lag,) = loop_lags([make_session([b.batch([{1: p} for p in plan])])], threshold_s=0.05)
    assert lag.spans == 1 and abs(lag.lag_s - 0.10) < 1e-6
    top = lag.culprits[0]
    assert top.site == f"quote ({STDLIB}/urllib/parse.py)" and top.caller.startswith("build_url ("), top
    assert top.doing == "running Python" and abs(top.seconds - 0.09) < 1e-6


def test_a_console_script_entry_is_not_the_application():
    from gilty.load.sites import site_key

    entry = ("<module>", "/srv/venv/bin/gunicorn", 8)
    framework = [
        ("h11_impl.handle", f"{SITE}/uvicorn/protocols/http/h11_impl.py", 400),
        ("run", f"{SITE}/gunicorn/app/wsgiapp.py", 66),
        entry,
    ]
    # nothing of the application's: the innermost frame, not the entry script's caller chain
    assert site_key(framework, PREFIXES)[:2] == ("h11_impl.handle", f"{SITE}/uvicorn/protocols/http/h11_impl.py")
    app = [("quote", f"{STDLIB}/urllib/parse.py", 893), ("build_url", "/srv/app.py", 12), *framework]
    assert site_key(app, PREFIXES) == ("quote", f"{STDLIB}/urllib/parse.py", 893, "build_url (/srv/app.py:12)")


def test_a_loop_woken_at_its_selector_without_a_cpu_is_at_rest():
    # A busy host: the loop thread woken at `select` and waiting for a CPU is not lag (no code of the
    # program holds it), while a callback held off the CPU is charged as such, not as "unknown".
    b = BatchBuilder(names={1: "MainThread"})
    base = [("BaseEventLoop._run_once", f"{STDLIB}/asyncio/base_events.py", 1884)]
    select = b.stack(("EpollSelector.select", f"{STDLIB}/selectors.py", 468), *base)
    cpu = b.stack(
        ("build_url", "/srv/app.py", 28),
        ("cpu", "/srv/app.py", 60),
        ("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212),
        *base,
    )
    plan = (
        [(IDLE, select, EPOLL_WAIT)] * 10
        + [(CPU_WAIT, select)] * 8
        + [(IDLE, select, EPOLL_WAIT)] * 10
        + [(HOLD, cpu)] * 3
        + [(CPU_WAIT, cpu)] * 4
        + [(IDLE, select, EPOLL_WAIT)] * 10
    )
    (lag,) = loop_lags([make_session([b.batch([{1: p} for p in plan])])], threshold_s=0.05)
    assert lag.spans == 1 and abs(lag.lag_s - 0.07) < 1e-6, lag
    assert abs(lag.at_rest - 38 / 45) < 1e-6, lag.at_rest
    doing = {c.doing: c.seconds for c in lag.culprits}
    assert set(doing) == {"running Python", "waiting for a CPU"}, doing
    assert all(c.site == "build_url (/srv/app.py:28)" for c in lag.culprits), lag.culprits
