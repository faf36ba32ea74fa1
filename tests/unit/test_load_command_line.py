"""`gilty load`'s command line as issue 8 writes it: `... -- gunicorn ... app:app -o run.html` puts
gilty's report file after the server command. A trailing -o/--output FILE is taken as gilty's (and
said so on stderr) unless gilty's own -o came before `--`; anything else stays the server's."""

from __future__ import annotations

import pytest
from gilty.cli import parse_options

ISSUE_8 = (
    "load http://127.0.0.1:8000/ --ramp 50:1000:50 --slo p99=50ms "
    "-- gunicorn -w 4 -k uvicorn.workers.UvicornWorker app:app -o run.html"
).split()


def parse(argv: list):
    """The LoadOptions `gilty ARGV` runs with."""
    return parse_options(argv)


def test_the_issues_command_line_writes_gilty_s_report(capsys):
    options = parse(ISSUE_8)
    assert options.output.path == "run.html" and options.output.format == "html"
    assert options.server.command == "gunicorn -w 4 -k uvicorn.workers.UvicornWorker app:app".split()
    assert options.rates == tuple(range(50, 1001, 50)) and options.ramp and options.slo == ("p99", 0.05)
    note = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(note) == 1 and "run.html" in note[0] and "gilty's" in note[0], note


@pytest.mark.parametrize("tail,output", [(["--output", "r.json"], "r.json"), (["--output=r.html"], "r.html")])
def test_long_forms(tail, output):
    options = parse(["load", "http://127.0.0.1:8000/", "--rate", "10", "--", "srv", "--port", "8000", *tail])
    assert options.output.path == output and options.server.command == ["srv", "--port", "8000"]


@pytest.mark.parametrize(
    "argv",
    [
        # gilty's own -o before --: the trailing one is the server's
        ["load", "http://h:1/", "--rate", "1", "-o", "mine.html", "--", "srv", "-o", "its.log"],
        # -o not at the end: the server's
        ["load", "http://h:1/", "--rate", "1", "--", "srv", "-o", "its.log", "--verbose"],
        # nothing would be left of the server command
        ["load", "http://h:1/", "--rate", "1", "--", "-o", "x.html"],
    ],
)
def test_other_placements_stay_where_they_are(argv, capsys):
    own_output = argv[argv.index("-o") + 1] if argv.index("-o") < argv.index("--") else None
    options = parse(argv)
    assert options.output.path == own_output
    assert options.server.command == argv[argv.index("--") + 1 :]
    assert capsys.readouterr().err == ""


def test_app_packages_are_repeatable_and_stay_gilty_s():
    options = parse(
        [
            "load",
            "http://127.0.0.1:8000/",
            "--rate",
            "10",
            "--app",
            "httpbin",
            "--app",
            "shop.views",
            "--",
            "gunicorn",
            "httpbin:app",
        ]
    )
    # both names, in the order given, as the package directory or module file each may be
    assert options.server.app.fragments == ("/httpbin/", "/httpbin.py", "/shop/views/", "/shop/views.py")
    assert options.server.command == ["gunicorn", "httpbin:app"]
