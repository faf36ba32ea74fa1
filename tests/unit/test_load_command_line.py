"""`gilty load`'s command line as issue 8 writes it: `... -- gunicorn ... app:app -o run.html` puts
gilty's report file after the server command. A trailing -o/--output FILE is taken as gilty's (and
said so on stderr) unless gilty's own -o came before `--`; anything else stays the server's."""

from __future__ import annotations

import pytest
from gilty.cli import build_parser, split_child_command
from gilty.load.options import trailing_output

ISSUE_8 = (
    "load http://127.0.0.1:8000/ --ramp 50:1000:50 --slo p99=50ms "
    "-- gunicorn -w 4 -k uvicorn.workers.UvicornWorker app:app -o run.html"
).split()


def parse(argv: list):
    own, child = split_child_command(argv)
    args = build_parser("load").parse_args(own)
    args.output, args.child_argv = trailing_output(args.output, child)
    return args


def test_the_issues_command_line_writes_gilty_s_report(capsys):
    args = parse(ISSUE_8)
    assert args.output == "run.html"
    assert args.child_argv == "gunicorn -w 4 -k uvicorn.workers.UvicornWorker app:app".split()
    assert args.ramp == "50:1000:50" and args.slo == "p99=50ms"
    note = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(note) == 1 and "run.html" in note[0] and "gilty's" in note[0], note


@pytest.mark.parametrize("tail,output", [(["--output", "r.json"], "r.json"), (["--output=r.html"], "r.html")])
def test_long_forms(tail, output):
    args = parse(["load", "http://127.0.0.1:8000/", "--rate", "10", "--", "srv", "--port", "8000", *tail])
    assert args.output == output and args.child_argv == ["srv", "--port", "8000"]


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
    args = parse(argv)
    assert args.output == own_output
    assert args.child_argv == argv[argv.index("--") + 1 :]
    assert capsys.readouterr().err == ""


def test_app_packages_are_repeatable_and_stay_gilty_s():
    args = parse(
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
    assert args.app == ["httpbin", "shop.views"] and args.child_argv == ["gunicorn", "httpbin:app"]
