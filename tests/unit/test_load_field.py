"""The knee's cause and the endpoint table on the shapes seen in the field (issue 21, items 2-4),
on recordings built pass by pass (tests/unit/synthetic.py): an application installed in
site-packages (httpbin), sync workers waiting for work in `select`, a Django worker split between the
GIL and sqlite beside idle workers, an event loop importing at start-up, late sampling passes, and a
p99 from 30 answers."""

from __future__ import annotations

from gilty.load import analysis, endpoints, kinds, profile, task_endpoints
from gilty.load.endpoints import FRAMEWORK, endpoint_table, handler_frame
from gilty.load.eventloop import loop_lags
from gilty.load.sites import AppScope, site_key
from gilty.sampling.session import Recording
from synthetic import ACCEPT4, EPOLL_WAIT, HOLD, IDLE, NATIVE, PSELECT6, RECVFROM, BatchBuilder, make_session

SITE = "/venv/lib/python3.12/site-packages"
STDLIB = "/usr/lib/python3.12"  # synthetic.target()'s executable is /usr/bin/python3.12
PREFIXES = (f"{STDLIB}/",)

# httpbin's /bytes view as pip installs it: every frame is in site-packages or the standard library.
RANDOM = [
    ("Random._randbelow_with_getrandbits", f"{STDLIB}/random.py", 242),
    ("Random.randrange", f"{STDLIB}/random.py", 322),
    ("Random.randint", f"{STDLIB}/random.py", 336),
]
VIEW = ("random_bytes", f"{SITE}/httpbin/core.py", 1460)
FLASK = [
    ("Flask.dispatch_request", f"{SITE}/flask/app.py", 902),
    ("Flask.full_dispatch_request", f"{SITE}/flask/app.py", 917),
    ("Flask.wsgi_app", f"{SITE}/flask/app.py", 1511),
    ("Flask.__call__", f"{SITE}/flask/app.py", 1536),
    ("SyncWorker.handle_request", f"{SITE}/gunicorn/workers/sync.py", 178),
]
SYNC_WAIT = [
    ("SyncWorker.wait", f"{SITE}/gunicorn/workers/sync.py", 36),
    ("SyncWorker.run_for_one", f"{SITE}/gunicorn/workers/sync.py", 72),
    ("SyncWorker.run", f"{SITE}/gunicorn/workers/sync.py", 125),
]


def test_a_view_installed_in_site_packages_is_the_endpoint():
    stack = [*RANDOM, VIEW, *FLASK]
    # before issue 21: "(framework)" for all of httpbin's server time
    assert handler_frame(stack, PREFIXES) == VIEW
    # its site is the library function the view called, not random's internals
    own = AppScope(("site-packages/httpbin/",))
    assert site_key(stack, PREFIXES, own) == (
        "Random.randint",
        f"{STDLIB}/random.py",
        336,
        f"random_bytes ({SITE}/httpbin/core.py:1460)",
    )
    # --app httpbin says the same, wherever httpbin is installed
    assert site_key(stack, PREFIXES, AppScope.of_packages(["httpbin"]))[0] == "Random.randint"
    # a decorator of the framework between the dispatch and the view is looked through; generated code is no handler
    wrapped = [
        VIEW,
        ("wrapper", "<decorator-gen-3>", 2),
        ("_view_wrapper", f"{SITE}/django/views/decorators/csrf.py", 65),
        ("BaseHandler._get_response", f"{SITE}/django/core/handlers/base.py", 197),
    ]
    assert handler_frame(wrapped, PREFIXES) == VIEW
    created = [
        ("__create_fn__", "<string>", 3),
        ("_process_class", f"{STDLIB}/dataclasses.py", 1000),
        ("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212),
    ]
    assert handler_frame(created, PREFIXES) == FRAMEWORK


def test_endpoint_table_names_the_site_packages_view():
    b = BatchBuilder(names={1: "MainThread"})
    busy = b.stack(*RANDOM, VIEW, *FLASK)
    wait = b.stack(*SYNC_WAIT)
    passes = [{1: (HOLD, busy)}] * 60 + [{1: (IDLE, wait, PSELECT6)}] * 40
    (row,) = endpoint_table([make_session([b.batch(passes)])])
    assert (row.function, row.file) == VIEW[:2], row
    assert row.top_site == f"Random.randint ({STDLIB}/random.py)" and row.top_site_share == 1.0, row


def _worker(b: BatchBuilder, pid: int, plan: list):
    b._sent_stacks.clear()  # each process's session gets its own stacks and frames
    b._sent_frames.clear()
    return make_session([b.batch([{1: p} for p in plan])], pid=pid)


def test_a_sync_worker_waiting_in_select_waits_for_work_not_on_a_dependency():
    # httpbin under gunicorn's sync worker: 68 % in select() on the listening socket, 32 % in the view.
    b = BatchBuilder(names={1: "MainThread"})
    busy = b.stack(*RANDOM, VIEW, *FLASK)
    wait = b.stack(*SYNC_WAIT)
    plan = [(HOLD, busy)] * 32 + [(IDLE, wait, PSELECT6)] * 68
    p = profile.summarise_step(Recording([_worker(b, 10, plan), _worker(b, 11, plan)], rate_hz=100.0))
    assert p.idle_kinds[kinds.WAITING_FOR_WORK] == 0.68, p.idle_kinds
    assert kinds.DEPENDENCY_WAIT not in p.idle_kinds
    limit, words = profile.limit_from_profile(p)
    # before issue 21: "I/O wait on a dependency", "blocked in I/O 68 %"
    assert limit == "waiting for work" and "68%" in words, (limit, words)
    # a handler blocked reading a socket is the dependency wait
    dep = b.stack(
        ("SocketIO.readinto", f"{STDLIB}/socket.py", 706),
        ("fetch", "/srv/app/client.py", 9),
        ("view", "/srv/app/views.py", 3),
        *FLASK,
    )
    plan = [(IDLE, dep, RECVFROM)] * 70 + [(HOLD, busy)] * 10 + [(IDLE, wait, ACCEPT4)] * 20
    p = profile.summarise_step(Recording([_worker(b, 12, plan)], rate_hz=100.0))
    assert profile.limit_from_profile(p)[0] == "I/O wait on a dependency", p.idle_kinds
    assert p.idle_kinds[kinds.WAITING_FOR_WORK] == 0.2


def test_requests_queued_at_a_semaphore_name_it_as_the_limit():
    # aiohttp behind asyncio.Semaphore(2): the loop sits at its selector, the requests' tasks await a slot.
    b = BatchBuilder(names={1: "MainThread"})
    wait = b.stack(*SYNC_WAIT)
    p = profile.summarise_step(
        Recording(
            [_worker(b, 30, [(IDLE, wait, PSELECT6)] * 90 + [(HOLD, b.stack(("quote", "/srv/app/server.py", 22)))] * 10)],
            rate_hz=100.0,
        )
    )
    awaits = [
        {
            "kind": "semaphore",
            "function": "quote",
            "file": "/srv/app/server.py",
            "line": 22,
            "code": "async with sem:",
            "share": 0.9,
        }
    ]
    p.task_endpoints = [task_endpoints.TaskEndpoint("quote", "/srv/app/server.py", 4.0, {"awaiting": 0.9}, awaits)]
    limit, words = profile.limit_from_profile(p)
    # before: "waiting for work", the semaphore only a possible cause after a colon
    assert limit == "awaiting a semaphore", (limit, words)
    assert words.startswith(
        "requests to `quote (server.py)` spend 90% of their time awaiting `async with sem:` (server.py:22, semaphore)"
    ), words
    # an await that does not cap concurrency (a sleep, a socket) stays a cause of the wait
    awaits[0]["kind"] = "sleep"
    assert profile.limit_from_profile(p)[0] == "waiting for work"
    # The handler's thread samples are its moments on the loop, all holding the GIL: with its tasks
    # awaiting 90 %, it is not "holding the GIL 100 % of its time" (said after the limit before).
    p.endpoints = [endpoints.Endpoint("quote", "/srv/app/server.py", {"holding_gil": 0.1}, 0.1, 1.0)]
    assert not any("endpoint `quote" in c for c in profile.other_causes(p, "awaiting a semaphore")), profile.other_causes(p, "x")
    p.task_endpoints = []
    assert any("endpoint `quote (server.py)` holds the GIL 100%" in c for c in profile.other_causes(p, "x"))


def test_the_cause_comes_from_the_busiest_workers():
    # Django: two workers hold the GIL 31 % and run sqlite 45 %; two more wait for work all along.
    b = BatchBuilder(names={1: "MainThread"})
    django = [
        ("BaseHandler._get_response", f"{SITE}/django/core/handlers/base.py", 197),
        ("WSGIHandler.__call__", f"{SITE}/django/core/handlers/wsgi.py", 124),
        ("SyncWorker.handle_request", f"{SITE}/gunicorn/workers/sync.py", 178),
    ]
    view = ("report", "/srv/site/shop/views.py", 14)
    sqlite = b.stack(
        ("CursorWrapper._execute", f"{SITE}/django/db/backends/utils.py", 105),
        ("CursorWrapper.execute", f"{SITE}/django/db/backends/utils.py", 79),
        view,
        *django,
    )
    python = b.stack(("JsonResponse.__init__", f"{SITE}/django/http/response.py", 732), view, *django)
    wait = b.stack(*SYNC_WAIT)
    busy_plan = [(HOLD, python)] * 31 + [(NATIVE, sqlite)] * 45 + [(IDLE, wait, PSELECT6)] * 24
    idle_plan = [(HOLD, python)] * 6 + [(IDLE, wait, PSELECT6)] * 94
    p = profile.summarise_step(
        Recording(
            [_worker(b, 20, busy_plan), _worker(b, 21, busy_plan), _worker(b, 22, idle_plan), _worker(b, 23, idle_plan)],
            rate_hz=100.0,
        )
    )
    assert p.busy_processes == 2
    limit, words = profile.limit_from_profile(p)
    # before issue 21: "concurrency", "mostly idle"
    assert limit == "native code", (limit, words)
    assert "45%" in words and "`CursorWrapper.execute`" in words and "report (/srv/site/shop/views.py:14)" in words, words


def test_shares_are_at_most_100_percent():
    b = BatchBuilder(names={1: "MainThread", 2: "worker"})
    # Two threads read as holding the GIL in the same passes (a torn read): a site's share of passes
    # would be 200 %.
    spin = b.stack(
        ("dumps", f"{STDLIB}/json/__init__.py", 231),
        ("view", "/srv/app/views.py", 3),
        ("Flask.dispatch_request", f"{SITE}/flask/app.py", 902),
    )
    s = make_session([b.batch([{1: (HOLD, spin), 2: (HOLD, spin)}] * 50)])
    p = profile.summarise_step(Recording([s], rate_hz=100.0))
    assert p.sites[0].function == "dumps" and p.sites[0].share <= 1.0, p.sites
    # An event loop whose passes in a lag span came closer together than the mean period: its
    # culprits share the span's measured length, never more.
    b = BatchBuilder(names={1: "MainThread"})
    base = [("BaseEventLoop._run_once", f"{STDLIB}/asyncio/base_events.py", 1884)]
    select = b.stack(("EpollSelector.select", f"{STDLIB}/selectors.py", 468), *base)
    block = b.stack(
        ("dumps", f"{STDLIB}/json/__init__.py", 231),
        ("block", "/srv/app.py", 34),
        ("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212),
        *base,
    )
    plan = [(IDLE, select, EPOLL_WAIT)] * 20 + [(HOLD, block)] * 10 + [(IDLE, select, EPOLL_WAIT)] * 20
    times, t = [], 0.0
    for i in range(len(plan)):
        times.append(t)
        t += 0.004 if 20 <= i < 30 else 0.016
    s = make_session([b.batch([{1: p} for p in plan], times=times)])
    (lag,) = loop_lags([s], threshold_s=0.02)
    assert lag.spans == 1
    assert sum(c.seconds for c in lag.culprits) <= lag.lag_s + 1e-9, (lag.culprits, lag.lag_s)


def test_startup_in_a_step_is_not_load():
    # A uvicorn worker importing its application in the loop thread: a long span under importlib.
    b = BatchBuilder(names={1: "MainThread"})
    base = [("BaseEventLoop._run_once", f"{STDLIB}/asyncio/base_events.py", 1884)]
    select = b.stack(("EpollSelector.select", f"{STDLIB}/selectors.py", 468), *base)
    importing = b.stack(
        ("FileLoader.get_data", "<frozen importlib._bootstrap_external>", 1131),
        ("SourceLoader.get_code", "<frozen importlib._bootstrap_external>", 1012),
        ("_load_unlocked", "<frozen importlib._bootstrap>", 690),
        ("import_from_string", f"{SITE}/uvicorn/importer.py", 19),
        *base,
    )
    compiling = b.stack(
        ("_compile_bytecode", "<frozen importlib._bootstrap_external>", 729),
        ("_load_unlocked", "<frozen importlib._bootstrap>", 690),
        *base,
    )
    block = b.stack(("block", "/srv/app.py", 34), ("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212), *base)
    plan = (
        [(IDLE, importing, 0)] * 30
        + [(HOLD, compiling)] * 20
        + [(IDLE, select, EPOLL_WAIT)] * 30
        + [(IDLE, block, 230)] * 3
        + [(IDLE, select, EPOLL_WAIT)] * 17
    )
    p = profile.summarise_step(Recording([make_session([b.batch([{1: x} for x in plan])])], rate_hz=100.0))
    assert abs(p.startup_share - 0.5) < 1e-9 and p.startup_sites[0] == "FileLoader.get_data (importlib)", p
    (loop,) = p.loops
    # before issue 21: one 500 ms span under `FileLoader.get_data`, the loop "blocked" 50 %
    assert all("importlib" not in c.site and "get_data" not in c.site for c in loop.culprits), loop.culprits
    assert loop.lag_share < 0.1, loop
    assert profile.limit_from_profile(p)[0] != "event loop blocked"
    assert "start-up" in profile.startup_words(p)
    assert all("get_data" not in s.function and "_compile" not in s.function for s in p.sites), p.sites
    # the GIL held while compiling is start-up's, not the load's
    assert p.gil_utilisation == 0.0, p.gil_utilisation
    assert [e.function for e in p.endpoints] == ["block"]


def test_a_percentile_from_few_answers_says_so():
    assert analysis.min_answers("p99") == 200 and analysis.min_answers("p50") == 4 and analysis.min_answers("p99_9") == 2000

    def step(answers):
        return {
            "requested_rate": 10.0,
            "ok": answers,
            "completed": answers,
            "errors": {},
            "dropped": 0,
            "window_s": 3.0,
            "latency_s": {"p99": 0.02},
            "service_s": {"p99": 0.02, "mean": 0.01},
            "in_flight_mean": 0.1,
            "wall_s": 3.0,
            "generator": {"lag_p99_s": 0.0, "cpu_s": 0.1, "threads": 1},
        }

    few = analysis.judge(step(30), ("p99", 0.05))
    assert few.few_answers and few.answers == 30
    assert not analysis.judge(step(600), ("p99", 0.05)).few_answers
    knee = analysis.find_knee([step(30), step(30)], [few, analysis.judge(step(30), ("p99", 0.01))], ("p99", 0.05))
    notes = analysis.knee_notes([few], knee)
    assert notes and "30 answers" in notes[0]

    # The knee's parts are fields: a profile's cause replaces the generic one without cutting the
    # sentence at its ';' (issue 29), and the whole reads as before.
    passed = analysis.judge(step(600), ("p99", 0.05))
    reading = analysis.read_knee([step(600), step(600)], [passed, analysis.judge(step(600), ("p99", 0.01))], ("p99", 0.05))
    assert reading.condition == "above 10 rps p99 <= 50 ms no longer holds"
    assert reading.knee().explanation == (
        "above 10 rps p99 <= 50 ms no longer holds; the server completes at most 200 rps, "
        "i.e. about 2.0 requests at a time at its low-load service time"
    )
    reading.limit, reading.cause, reading.also, reading.notes = "CPU in Python", "the workers hold the GIL", ["a", "b"], ["n"]
    knee = reading.knee()
    assert knee.limit == "CPU in Python"
    assert knee.explanation == "above 10 rps p99 <= 50 ms no longer holds; the workers hold the GIL. Also: a; b. Note: n"


def test_idle_asyncio_workers_wait_for_work():
    # FastAPI under 4 uvicorn workers at 10 rps: each loop sits at its selector with nothing ready,
    # now and then serving a short request.
    b = BatchBuilder(names={1: "MainThread"})
    base = [
        ("BaseEventLoop._run_once", f"{STDLIB}/asyncio/base_events.py", 1884),
        ("BaseEventLoop.run_forever", f"{STDLIB}/asyncio/base_events.py", 607),
    ]
    select = b.stack(("EpollSelector.select", f"{STDLIB}/selectors.py", 468), *base)
    serve = b.stack(("fast", "/srv/app.py", 48), ("run_endpoint_function", f"{SITE}/fastapi/routing.py", 212), *base)
    plan = ([(IDLE, select, EPOLL_WAIT)] * 9 + [(HOLD, serve)]) * 10
    p = profile.summarise_step(Recording([_worker(b, 30 + i, plan) for i in range(4)], rate_hz=100.0))
    assert p.idle_kinds[kinds.WAITING_FOR_WORK] == 0.9
    limit, words = profile.limit_from_profile(p)
    # before issue 21: "concurrency", "mostly idle ... too few requests are served at once"
    assert limit == "waiting for work" and "too few requests" not in words, (limit, words)


def test_app_names_the_application_wherever_installed():
    assert AppScope.of_packages(["httpbin", "shop.views"]).fragments == (
        "/httpbin/",
        "/httpbin.py",
        "/shop/views/",
        "/shop/views.py",
    )
    # a decorator from another installed library wraps the view: --app says which frame is the app's
    deco = ("login_required.<locals>.wrapper", f"{SITE}/authlib/decorators.py", 20)
    view = ("profile", f"{SITE}/shop/views.py", 12)
    stack = [
        ("quote", f"{STDLIB}/urllib/parse.py", 893),
        view,
        deco,
        ("BaseHandler._get_response", f"{SITE}/django/core/handlers/base.py", 197),
    ]
    assert handler_frame(stack, PREFIXES) == deco
    assert handler_frame(stack, PREFIXES, AppScope.of_packages(["shop"])) == view


def test_workers_waiting_for_work_all_along_say_so():
    b = BatchBuilder(names={1: "MainThread"})
    wait = b.stack(*SYNC_WAIT)
    plan = [(IDLE, wait, PSELECT6)] * 100
    p = profile.summarise_step(Recording([_worker(b, 40, plan), _worker(b, 41, plan)], rate_hz=100.0))
    assert p.idle_kinds[kinds.WAITING_FOR_WORK] == 1.0
    assert profile.limit_from_profile(p)[0] == "waiting for work"


def test_a_busy_host_does_not_turn_cpu_demand_into_concurrency():
    # The same Django worker on a host whose CPUs are taken: a third of its time runnable without one.
    b = BatchBuilder(names={1: "MainThread"})
    view = ("report", "/srv/site/shop/views.py", 14)
    sqlite = b.stack(("CursorWrapper.execute", f"{SITE}/django/db/backends/utils.py", 79), view)
    python = b.stack(("JsonResponse.__init__", f"{SITE}/django/http/response.py", 732), view)
    wait = b.stack(*SYNC_WAIT)
    cpu_wait = 6
    plan = [(HOLD, python)] * 15 + [(NATIVE, sqlite)] * 25 + [(cpu_wait, sqlite)] * 35 + [(IDLE, wait, PSELECT6)] * 25
    p = profile.summarise_step(Recording([_worker(b, 30, plan)], rate_hz=100.0))
    limit, words = profile.limit_from_profile(p)
    # before: held + native (40 %) is under 60 % of the working time (75 %), so "concurrency: mostly idle"
    assert limit == "native code", (limit, words)
    assert "35% of the time runnable without a CPU" in words, words
