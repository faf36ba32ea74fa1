"""Every command and every option given bad values: exit 2 and one `gilty: error:` line, never a
traceback, a hang or work started first. Run in this process: every case fails before any process
is read or any request sent, so none needs a target.
"""

from __future__ import annotations

import re

import pytest
from gilty.cli import main as gilty_main

PID = ["--pid", "1"]
URL = "http://127.0.0.1:9/"

# Values no number option takes.
BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "-1", "0", "-0.5", "1e300", "abc", "", "1,5", "0x10"]
BAD_COUNTS = ["nan", "inf", "-1", "0", "1.5", "1e3", str(10**20), "abc", ""]

# command -> (arguments that make the rest valid, {option: kind})
OPTIONS = {
    "record": (PID, {"--duration": "seconds", "--rate": "hz", "--pid": "count"}),
    "top": (PID, {"--duration": "seconds", "--rate": "hz", "--pid": "count"}),
    "dump": (PID, {"--pid": "count"}),
    "memory": (PID, {"--duration": "seconds", "--interval": "seconds", "--gc-poll": "seconds", "--pid": "count"}),
    "serve": (PID, {"--rate": "hz", "--port": "count", "--pid": "count"}),
    "specialization": (
        PID,
        {"--duration": "seconds", "--rate": "hz", "--read-interval": "seconds", "--top": "count", "--pid": "count"},
    ),
    "load": (
        [URL, "--rate", "10"],
        {
            "--rate": "seconds",
            "--duration": "seconds",
            "--timeout": "seconds",
            "--warmup": "seconds",
            "--loop-lag": "seconds",
            "--spawn-rate": "seconds",
            "--connections": "count",
            "--threads": "count",
            "--max-in-flight": "count",
            "--users": "count",
            "--workers": "count",
            "--profile": "count",
        },
    ),
}
# Too large to be meant, for each kind (each would have overflowed, built a huge list or spun).
HUGE = {"seconds": ["1e20", "1e8"], "hz": ["1e9", "20001", "0.001"], "count": [str(2**40)]}

# Whole command lines, each bad in one way the issue names or that is of the same family.
COMMAND_LINES = [
    ["load", URL, "--ramp", "10:inf:5"],
    ["load", URL, "--ramp", "1:100000000:1"],
    ["load", URL, "--ramp", "-10:10:5"],
    ["load", URL, "--ramp", "nan:10:5"],
    ["load", URL, "--ramp", "10:5:1"],
    ["load", URL, "--ramp", "1:10:0"],
    ["load", URL, "--ramp", "1:10:5e-324"],
    ["load", URL, "--ramp", "1:10"],
    ["load", URL, "--ramp", "a:b:c"],
    ["load", URL, "--rate", "1e12"],
    ["load", URL, "--rate", "1e300"],
    ["load", URL, "--rate", "1e9"],
    ["load", URL, "--rate", "10", "--duration", "1e20"],
    ["load", URL + "@abc", "--rate", "10"],
    ["load", URL + "@-1", "--rate", "10"],
    ["load", URL + "@0", "--rate", "10"],
    ["load", URL + "@inf", "--rate", "10"],
    ["load", URL + "@nan", "--rate", "10"],
    ["load", "https://127.0.0.1/", "--rate", "10"],
    ["load", "ftp://127.0.0.1/", "--rate", "10"],
    ["load", URL, "--rate", "10", "--slo", "p99=abc"],
    ["load", URL, "--rate", "10", "--slo", "p98=1ms"],
    ["load", URL, "--rate", "10", "--slo", "p99=-1ms"],
    ["load", URL, "--rate", "10", "--seed", "-1"],
    ["load", URL, "--rate", "10", "--seed", str(2**64)],
    ["load", URL, "--rate", "10", "-o", "x.svg"],
    ["load", URL, "--rate", "10", "--ramp", "1:2:1"],
    ["load", URL],
    ["load", URL, "--rate", "10", "-H", "no colon"],
    ["serve", "--pid", "1", "--port", "70000"],
    ["serve", "--pid", "1", "--port", "-1"],
    ["specialization", "--pid", "1", "-o", "x.svg"],
    ["specialization", "--pid", "1", "-o", "x.collapsed"],
    ["specialization", "--pid", "1", "--format", "svg"],
    ["memory", "--pid", "1", "-o", "x.svg"],
    ["record", "--pid", "1", "-o", "x.pdf"],
    ["record", "--pid", "1", "--format", "pdf"],
    ["record", "--pid", "1", "--fail-if", "waiting_gil>>2"],
    ["top", "--pid", "1", "--sort", "nothing"],
    ["report", "rec.json", "-o", "x.pdf"],
    ["report", "rec.json", "--format", "pdf"],
    ["report", "/nonexistent/rec.json"],
    ["report", "/dev/zero"],
    ["compare", "/nonexistent/a.json", "/nonexistent/b.json"],
    ["compare", "/dev/zero", "/dev/zero"],
    ["compare", "a.json"],
    ["dump", "--pid", "1", "-o", "x.json"],
    ["mcp", "--pid", "1"],  # a tool's arguments come with its call, not on the command line
    ["mcp", "stdio"],
]


def option_cases() -> list:
    cases = []
    for command, (base, options) in OPTIONS.items():
        for option, kind in options.items():
            values = (BAD_COUNTS if kind == "count" else BAD_NUMBERS) + HUGE[kind]
            for value in values:
                args = list(base)
                if option in args:  # replace the base's own value of this option
                    i = args.index(option)
                    del args[i : i + 2]
                cases.append([command, *args, option, value])
    return cases


CASES = option_cases() + COMMAND_LINES


def counts_per_command() -> dict:
    counts: dict = {}
    for argv in CASES:
        counts[argv[0]] = counts.get(argv[0], 0) + 1
    return counts


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(a)[:80])
def test_bad_input_is_one_line_and_exit_2(argv, capsys):
    rc = gilty_main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, f"exit {rc}: {err}"
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gilty: error:"), err
    assert out == ""


def test_every_command_is_in_the_table(capsys):
    # the commands as the program lists them in its help, one per line under COMMAND
    assert gilty_main(["--help"]) == 0
    listed = set(re.findall(r"^    ([a-z]+)(?: |$)", capsys.readouterr().out, re.M))
    assert {"record", "load", "memory"} <= listed, listed
    assert set(counts_per_command()) == listed, counts_per_command()
