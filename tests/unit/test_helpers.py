"""Telling helpers from workers among a master's children (gilty.sampling.helpers, issue 31), on the
/proc facts read from real trees: uWSGI 2.0.31's --http router beside its workers, multiprocessing's
resource tracker beside a spawn pool."""

from gilty.sampling.helpers import Facts, helpers

MIB = 1 << 20
UWSGI = "/venv/bin/uwsgi"
CMD = "/venv/bin/uwsgi --master --processes 3 --http 127.0.0.1:8000 --wsgi-file app.py"
# SigCgt / SigIgn as read from a uWSGI 2.0.31 worker and its --http router.
WORKER_SIGS = dict(caught=0x8085E83, ignored=0x1000004)
ROUTER_SIGS = dict(caught=0x4486, ignored=0x1083A01)


def kid(pid, sigs, private=40 * MIB, listens=(41755,), cmdline=CMD, exe=UWSGI):
    return Facts(pid=pid, ppid=1, exe=exe, cmdline=cmdline, private_bytes=private, listens=listens, **sigs)


def test_uwsgi_router_is_a_helper_and_named_by_its_own_port():
    facts = {p: kid(p, WORKER_SIGS) for p in (10, 11, 12)}
    facts[13] = kid(13, ROUTER_SIGS, private=MIB // 4, listens=(8000,))
    found = helpers(facts)
    assert list(found) == [13]
    assert found[13].startswith(
        "router: listens on :8000, which its workers do not; handles signals unlike its 3 sibling workers"
    )


def test_one_worker_and_a_router_tie_goes_to_the_one_with_memory_of_its_own():
    facts = {10: kid(10, WORKER_SIGS, private=3 * MIB), 13: kid(13, ROUTER_SIGS, private=MIB // 4, listens=(8000,))}
    assert list(helpers(facts)) == [13]
    # As small as each other: nothing is said.
    facts[10].private_bytes = MIB // 2
    assert helpers(facts) == {}


def test_a_worker_that_installed_one_handler_more_is_still_a_worker():
    alarm = dict(WORKER_SIGS, caught=WORKER_SIGS["caught"] | 1 << 13)  # SIGALRM, for a request timeout
    facts = {10: kid(10, WORKER_SIGS), 11: kid(11, WORKER_SIGS), 12: kid(12, alarm)}
    assert helpers(facts) == {}


def test_resource_tracker_by_its_command_line_and_other_programs_left_alone():
    py = "/usr/bin/python3.12"
    facts = {
        20: kid(20, WORKER_SIGS, exe=py, cmdline=f"{py} -B -c from multiprocessing.resource_tracker import main;main(5)"),
        21: kid(
            21,
            WORKER_SIGS,
            exe=py,
            cmdline=f"{py} -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=6, pipe_handle=13)",
        ),
        22: kid(
            22,
            WORKER_SIGS,
            exe=py,
            cmdline=f"{py} -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=6, pipe_handle=15)",
        ),
        23: kid(23, ROUTER_SIGS, exe="/usr/bin/nginx", cmdline="nginx: worker process"),
    }
    assert helpers(facts) == {20: "multiprocessing's resource tracker"}


def test_roots_are_never_helpers():
    facts = {10: kid(10, WORKER_SIGS), 11: kid(11, WORKER_SIGS), 13: kid(13, ROUTER_SIGS, listens=(8000,))}
    assert helpers(facts, roots=(13,)) == {}
