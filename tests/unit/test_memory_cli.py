"""`gilty memory`'s command line with a stand-in for `_native.MemoryMonitor`: exit statuses, the partial
result when the master exits, one error line for native errors, usage errors."""

from __future__ import annotations

import json
import sys
import types

import pytest
from gilty.cli import main

MIB = 1 << 20


class StandInGiltyError(Exception):
    def __init__(self, message, kind):
        super().__init__(message)
        self.kind = kind


def batch(t, finished=False, master_exited=None, first=False):
    b = {
        "processes": [],
        "samples": [],
        "cow_steps": [],
        "gc_windows": [],
        "gc_snapshots": [],
        "notes": [],
        "master_exited": master_exited,
        "finished": finished,
    }
    if first:
        b["processes"].append(
            {
                "pid": 7,
                "ppid": 1,
                "role": "master",
                "cmdline": "m",
                "first_seen": 0.0,
                "exited": None,
                "python": None,
                "gc_note": "not Python",
                "baseline": None,
            }
        )
    b["samples"].append(
        {
            "pid": 7,
            "pass": int(t),
            "t": t,
            "rss": 10 * MIB,
            "pss": 10 * MIB,
            "uss": 10 * MIB,
            "shared_clean": 0,
            "shared_dirty": 0,
            "private_clean": 0,
            "private_dirty": 10 * MIB,
            "anonymous": 10 * MIB,
            "swap": 0,
            "minflt": 1,
            "majflt": 0,
            "gc": None,
            "cost": {"stat_s": 1e-5, "smaps_s": 1e-3, "gc_s": 0.0, "pagemap_s": 0.0, "pages_read": 0},
        }
    )
    return b


def install_native(monkeypatch, batches=None, error=None, created=None):
    module = types.ModuleType("gilty._native")
    module.GiltyError = StandInGiltyError

    class MemoryMonitor:
        def __init__(self, pid, interval_s=1.0, gc_poll_s=0.001):
            if error is not None:
                raise error
            if created is not None:
                created.append((pid, interval_s, gc_poll_s))
            self.batches = list(batches or [])
            self.stopped = False

        def collect(self, seconds):
            if self.batches:
                return self.batches.pop(0)
            return batch(9.0) if not self.stopped else {"processes": [], "samples": [], "finished": True}

        def stop(self):
            self.stopped = True
            return {"elapsed_s": 1.0, "passes": 1, "gc_poll": {"cpu_s": 0.0}}

    module.MemoryMonitor = MemoryMonitor
    monkeypatch.setitem(sys.modules, "gilty._native", module)
    return module


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_master_exit_before_duration_is_partial(monkeypatch, capsys):
    install_native(monkeypatch, [batch(0.0, first=True), batch(1.0, finished=True, master_exited=1.2)])
    code, out, err = run(capsys, ["memory", "--pid", "7", "--duration", "30", "--format", "json"])
    assert code == 8
    report = json.loads(out)
    assert report["partial"] is True and "master pid 7 exited after 1.2 s of the requested 30 s" == report["partial_reason"]
    assert "PARTIAL" in err and "Traceback" not in err


def test_master_exit_without_duration_ends_the_run(monkeypatch, capsys):
    install_native(monkeypatch, [batch(0.0, first=True), batch(1.0, finished=True, master_exited=1.2)])
    code, out, err = run(capsys, ["memory", "--pid", "7"])
    assert code == 0
    assert not out.startswith("PARTIAL") and "gilty memory: master pid 7" in out


def test_duration_ends_the_run(monkeypatch, capsys):
    created = []
    install_native(monkeypatch, [batch(0.0, first=True)], created=created)
    code, out, err = run(capsys, ["memory", "--pid", "7", "--duration", "0.3", "--interval", "0.5", "--gc-poll", "2"])
    assert code == 0 and created == [(7, 0.5, 0.002)]
    assert "gilty: measuring pid 7" in err


@pytest.mark.parametrize("kind, status", [("no_such_process", 3), ("permission_denied", 6), ("internal", 1)])
def test_native_errors_are_one_line(monkeypatch, capsys, kind, status):
    install_native(monkeypatch, error=StandInGiltyError(f"pid 7: {kind}", kind))
    code, out, err = run(capsys, ["memory", "--pid", "7", "--duration", "1"])
    assert code == status
    assert err.splitlines() == [f"gilty: error: pid 7: {kind}"]
    assert out == ""


@pytest.mark.parametrize(
    "args",
    [
        ["memory"],
        ["memory", "--pid", "x"],
        ["memory", "--pid", "7", "--gc-poll", "5000"],
        ["memory", "--pid", "7", "--interval", "0"],
    ],
    ids=lambda a: " ".join(a),
)
def test_usage_errors(monkeypatch, capsys, args):
    install_native(monkeypatch)
    code, out, err = run(capsys, args)
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("gilty: error:")


def test_output_file_and_format_by_extension(monkeypatch, capsys, tmp_path):
    install_native(monkeypatch, [batch(0.0, first=True)])
    path = tmp_path / "m.json"
    code, out, err = run(capsys, ["memory", "--pid", "7", "--duration", "0.2", "-o", str(path)])
    assert code == 0 and out == ""
    assert json.loads(path.read_text())["kind"] == "memory"
    assert f"gilty: wrote {path}" in err
