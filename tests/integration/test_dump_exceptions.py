"""`gilty dump` flags threads handling an exception (inside `except`, or a `finally` run by a
propagating exception: what `sys.exc_info()` reports), read from the thread state's
exception-info stack, and does not flag threads that handled one earlier or never raised."""

from __future__ import annotations

import pytest
from conftest import parse_json, run_gilty, running_target, thread_named

pytestmark = pytest.mark.interpreter


@pytest.fixture(scope="module")
def exceptions_target(interp):
    with running_target(interp, "exceptions.py") as proc:
        yield proc


# Guards: a wrong exc_info/exc_value offset (nothing flagged, or everything), a level holding None
# taken as an exception (a thread that left its `except` still flagged), and the generator's own
# exception-info level not followed.
def test_threads_handling_an_exception_are_flagged(interp, exceptions_target):
    rc, out, err = run_gilty("dump", "--pid", exceptions_target.pid, "--format", "json", timeout=30)
    assert rc == 0, err
    dump = parse_json(out, "gilty dump --format json")
    got = {
        name: thread_named(dump, name)["handling_exception"]
        for name in ("in-except", "in-finally", "in-generator", "looping", "plain", "MainThread")
    }
    assert got == {
        "in-except": "ValueError",
        "in-finally": "KeyError",
        "in-generator": "AppError",
        "looping": None,
        "plain": None,
        "MainThread": None,
    }, got


# Guards: the text form not saying which threads are in an error path.
def test_text_dump_says_handling(interp, exceptions_target):
    rc, out, err = run_gilty("dump", "--pid", exceptions_target.pid, timeout=30)
    assert rc == 0, err
    header = {line.split("'")[1]: line for line in out.splitlines() if line.startswith("Thread ")}
    assert "; handling ValueError)" in header["in-except"], header
    assert "handling" not in header["looping"] and "handling" not in header["plain"], header
