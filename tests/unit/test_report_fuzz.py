"""`gilty report` and `gilty compare` on damaged recordings: every mutation exits 0 or 2, never 1.

A valid recording (two processes, stacks, blame, runs) is saved as a `gilty record` JSON report,
then damaged one field at a time: every value in it replaced by a value of another kind or out of
range (NaN, inf, negative, zero, huge, empty, wrong type), and a few whole-file damages (deep
nesting, truncation, a device). Each damaged file is rendered in every format, in this process.
"""

from __future__ import annotations

import copy
import io
import json
import random
import signal
from contextlib import redirect_stderr, redirect_stdout

import pytest
from gilty import report
from gilty.cli import main as gilty_main
from recordings import two_processes

# Stand-ins for a value: each of another kind or outside what a recorder writes.
REPLACEMENTS = [None, -1, 0, 10**30, float("nan"), float("inf"), -1e308, "x", "", [], {}, [[]], True, 1.5]
SAMPLED_LEAVES = 60  # leaves damaged per run of the test (seeded: the same ones every run)
HANG_GUARD_S = 120  # not a timing assertion: a hang fails the test instead of stalling the suite
DEEP_STACK = 20_000  # frames in one stack (the Chrome trace repeats a stack in every event: bigger is slow, not different)


def leaves(node, path=()):
    """Paths to every value of a JSON tree (containers included), depth first."""
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, path + (i,))


def replaced(doc, path, value):
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def run_cli(argv: list) -> tuple:
    out, err = io.StringIO(), io.StringIO()

    def hang(*_):
        raise TimeoutError(f"gilty {' '.join(argv)} did not finish within {HANG_GUARD_S} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(HANG_GUARD_S)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = gilty_main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def valid_report() -> dict:
    return {"format_version": 1, "recording": two_processes().to_dict()}


def damaged_documents(valid: dict) -> list:
    paths = [p for p in leaves(valid["recording"]) if p]
    rng = random.Random(15)
    chosen = rng.sample(paths, min(SAMPLED_LEAVES, len(paths)))
    # The fields the issue names, always: an empty frame, rate 0, empty times, negative states,
    # huge pass counts.
    process = valid["recording"]["processes"][0]
    frame_key = next(iter(process["frames"]))
    tid_key = next(iter(process["runs"]))
    named = [
        (("processes", 0, "frames", frame_key), []),
        (("rate_hz",), 0),
        (("processes", 0, "rate_hz"), 0),
        (("processes", 0, "times"), []),
        (("processes", 0, "runs", tid_key, "state"), [-1] * len(process["runs"][tid_key]["state"])),
        (("processes", 0, "runs", tid_key, "passes"), [2**40] * len(process["runs"][tid_key]["passes"])),
        (("processes", 0, "counts"), [[c[0], -3, c[2], c[3]] for c in process["counts"]]),
        (("processes", 0, "counts"), [[c[0], c[1], c[2], 10**12] for c in process["counts"]]),
    ]
    docs = []
    for path, value in named:
        docs.append(
            (
                f"{'/'.join(map(str, path))}={str(value)[:20]}",
                {"format_version": 1, "recording": replaced(valid["recording"], path, value)},
            )
        )
    for i, path in enumerate(chosen):
        value = REPLACEMENTS[i % len(REPLACEMENTS)]
        docs.append(
            (
                f"{'/'.join(map(str, path))}={value!r}",
                {"format_version": 1, "recording": replaced(valid["recording"], path, value)},
            )
        )
    return docs


def test_the_valid_recording_renders_in_every_format(valid_report, tmp_path):
    path = tmp_path / "valid.json"
    path.write_text(json.dumps(valid_report))
    for fmt in report.FORMAT_NAMES:
        rc, _out, err = run_cli(["report", str(path), "--format", fmt, "-o", str(tmp_path / f"out.{fmt}")])
        assert rc == 0, (fmt, err)


def test_damaged_recordings_exit_0_or_2(valid_report, tmp_path):
    failures = []
    tried = 0
    for name, doc in damaged_documents(valid_report):
        path = tmp_path / "damaged.json"
        path.write_text(json.dumps(doc))
        for fmt in report.FORMAT_NAMES:
            tried += 1
            rc, _out, err = run_cli(["report", str(path), "--format", fmt, "-o", str(tmp_path / "out")])
            if rc not in (0, 2) or (rc == 2 and len(err.splitlines()) != 1):
                failures.append(f"{name} as {fmt}: exit {rc}: {err.strip()[:200]}")
        rc, _out, err = run_cli(["compare", str(path), str(path)])
        tried += 1
        if rc not in (0, 2):
            failures.append(f"{name} compared: exit {rc}: {err.strip()[:200]}")
    assert not failures, f"{len(failures)} of {tried}:\n" + "\n".join(failures[:30])


@pytest.mark.parametrize(
    "content",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"recording": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"recording": {"recording_format_version": 1',
        "",
        "\x00\x01",
    ],
    ids=["deep-list", "deep-recording", "truncated", "empty", "binary"],
)
def test_broken_files_are_one_line_exit_2(content, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text(content)
    for argv in (["report", str(path)], ["compare", str(path), str(path)]):
        rc, _out, err = run_cli(argv)
        assert rc == 2 and len(err.splitlines()) == 1, (argv[0], rc, err[:300])


def test_a_device_is_refused_not_read_forever():
    for argv in (["report", "/dev/zero"], ["compare", "/dev/zero", "/dev/zero"]):
        rc, _out, err = run_cli(argv)
        assert rc == 2 and "not a regular file" in err, err


def test_deep_stack_renders_or_is_refused(valid_report, tmp_path):
    # 20,000 frames in one stack: drawn (the flame graph and tree builders must not recurse per frame)
    # or refused, but never an internal error.
    doc = copy.deepcopy(valid_report)
    process = doc["recording"]["processes"][0]
    process["frames"].update({str(10_000 + i): [f"f{i}", "deep.py", i + 1] for i in range(DEEP_STACK)})
    stack_key = next(iter(process["stacks"]))
    process["stacks"][stack_key] = [10_000 + i for i in range(DEEP_STACK)]
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(doc))
    for fmt in report.FORMAT_NAMES:
        rc, _out, err = run_cli(["report", str(path), "--format", fmt, "-o", str(tmp_path / "out")])
        assert rc in (0, 2), (fmt, err[:300])
    rc, _out, err = run_cli(["compare", str(path), str(path)])
    assert rc in (0, 2), err[:300]
