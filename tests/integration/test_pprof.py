"""pprof output read back by google's pprof tool (built from the Go module proxy by `make test`).

One recording of spinners.py is written as JSON and, through `gilty report`, as pprof: the same
samples, so pprof's totals per function (flat, the innermost frame) and per `state` label must equal
the ones computed from the JSON's recording exactly, in samples and in wall nanoseconds.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, run_gilty, running_target
from formats_support import recording_interpreter

sys.path.insert(0, str(REPO / "tests" / "unit"))


def pprof_tool() -> str:
    local = REPO / ".venv" / "bin" / "pprof"
    found = str(local) if local.exists() else shutil.which("pprof")
    if not found:
        pytest.skip(
            "google's pprof tool is not installed (make test builds it with `go install`; no Go toolchain or module proxy here)"
        )
    return found


def raw_samples(tool: str, path: Path) -> list:
    """[(values, {label: value}, [function names innermost first])] from `pprof -raw`."""
    out = subprocess.run([tool, "-raw", str(path)], capture_output=True, text=True, timeout=60, check=True).stdout
    samples_part, _, rest = out.partition("\nLocations\n")
    locations_part = rest.partition("\nMappings\n")[0]
    names = {}
    for line in locations_part.splitlines():
        m = re.match(r"\s*(\d+): 0x[0-9a-f]+ M=\d+ (.*?) (\S*):(\d+):\d+ s=", line)
        assert m, line
        names[int(m.group(1))] = m.group(2)
    samples = []
    for block in re.split(r"\n(?=\s+\d+\s+\d+: )", samples_part.split("[dflt]\n", 1)[1]):
        head, *label_lines = block.strip("\n").split("\n")
        counts, _, ids = head.partition(":")
        labels = dict(re.findall(r"(\w+):\[([^\]]*)\]", " ".join(label_lines)))
        samples.append(([int(v) for v in counts.split()], labels, [names[int(i)] for i in ids.split()]))
    return samples


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("pprof")
    with running_target(recording_interpreter(), "spinners.py") as proc:
        rc, _o, err = run_gilty("record", "--pid", proc.pid, "--duration", 1.5, "--rate", 200, "-o", out / "r.json")
        assert rc == 0, err
    rc, _o, err = run_gilty("report", out / "r.json", "-o", out / "r.pb.gz")
    assert rc == 0 and "wrote" in err, err
    return out


def test_totals_per_function_and_state_equal_the_json(written):
    from gilty.report.labels import state_name
    from gilty.sampling.session import NO_STACK, Recording

    tool = pprof_tool()
    recording = Recording.from_dict(json.loads((written / "r.json").read_text())["recording"])
    period_ns = round(1e9 / recording.rate_hz)
    want_state, want_function = Counter(), Counter()
    for session in recording.sessions:
        for (_tid, state, stack_id), n in session.stack_counts().items():
            want_state[state_name(state)] += n
            leaf = session.stack(stack_id)[0][0] if stack_id != NO_STACK and session.stack(stack_id) else "(no Python stack)"
            want_function[leaf] += n

    got_state, got_function, got_wall = Counter(), Counter(), 0
    for (count, wall), labels, functions in raw_samples(tool, written / "r.pb.gz"):
        assert wall == count * period_ns
        got_wall += wall
        got_state[labels["state"]] += count
        got_function[functions[0]] += count
        assert {"pid", "process", "thread", "tid"} <= set(labels), labels
    assert got_state == want_state
    assert got_function == want_function
    assert got_wall == sum(want_state.values()) * period_ns
    # The target's two spinners hold and wait for the GIL in spin_forever.
    assert want_function["spin_forever"] > 0 and want_state["waiting_gil"] > 0


def test_state_label_filters_in_pprof(written):
    tool = pprof_tool()
    out = subprocess.run(
        [tool, "-top", "-tagfocus", "state=waiting_gil", str(written / "r.pb.gz")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "spin_forever" in out and "Condition.wait" not in out, out


def test_record_writes_pprof_by_extension(tmp_path):
    path = tmp_path / "x.pprof"
    with running_target(recording_interpreter(), "spinners.py") as proc:
        rc, _o, err = run_gilty("record", "--pid", proc.pid, "--duration", 0.5, "-o", path)
    assert rc == 0, err
    body = gzip.decompress(path.read_bytes())
    assert b"spin_forever" in body and b"waiting_gil" in body


def test_encoder_wire_rules():
    from gilty.report.recording import pprof
    from recordings import one_process

    assert pprof._varint(0) == b"\x00" and pprof._varint(300) == b"\xac\x02"
    assert len(pprof._varint(-1)) == 10  # int64 -1: ten bytes, two's complement
    strings = pprof._Strings()
    assert strings("") == 0 and strings("a") == 1 and strings("a") == 1
    # An undecodable file name (surrogate-escaped) still makes valid UTF-8.
    strings("bad\udcff.py")
    strings.encoded().decode("utf-8")
    assert gzip.decompress(pprof.render(one_process()))  # renders a synthetic recording
