"""Ctrl-C and kill -9 of every long-running command, at start-up, mid-run and while writing.

After each trial: gilty is gone, printed no traceback, left no child (a server or command it
started, the guard that stops them) and no half-written output file, and the target it read is
unharmed. The counts of trials and of what was left behind are printed (`-s` shows them).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import TARGETS, free_port, gilty_command, gilty_env, running_target
from formats_support import recording_interpreter

SETTLE_TIMEOUT_S = 30.0  # a hang guard: what must go is normally gone within a few seconds
RESULTS: dict = {}


def descendants(pid: int) -> set:
    children: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, queue = set(), [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.add(child)
            queue.append(child)
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Trial:
    """One gilty command, its output collected as it comes."""

    def __init__(self, argv: list, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [*gilty_command(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=gilty_env(), cwd=str(cwd)
        )
        self.text: list = []
        self.seen_children: set = set()
        for stream in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in iter(stream.readline, b""):
            self.text.append(line.decode("utf-8", "replace"))

    def output(self) -> str:
        return "".join(self.text)

    def wait_for(self, test, what: str) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not test():
            self.seen_children |= descendants(self.proc.pid)
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"gilty never reached {what} (exit {self.proc.poll()}):\n{self.output()[-2000:]}")
            time.sleep(0.005)
        self.seen_children |= descendants(self.proc.pid)

    def native_loaded(self) -> bool:
        try:
            return "_native" in Path(f"/proc/{self.proc.pid}/maps").read_text()
        except OSError:
            return False


def commands(target_pid: int, tmp: Path) -> dict:
    """name -> (argv, what shows it is running, output file or None)."""
    port = free_port()
    server = [recording_interpreter().path, str(TARGETS / "http_delay_server.py"), str(port), "0.001", "threads"]
    out = tmp / "out.json"
    return {
        "record": (["record", "--pid", target_pid, "--duration", "60", "-o", out], r"gilty: recording", out),
        "record -s": (["record", "-s", "--pid", target_pid, "--duration", "60", "-o", out], r"gilty: recording", out),
        "record -- CMD": (["record", "--duration", "60", "-o", out, "--", *server], r"gilty: recording", out),
        "top": (["top", "--pid", target_pid, "--duration", "60"], r"GIL|holding|idle", None),
        "serve": (["serve", "--pid", target_pid, "--port", free_port()], r"gilty: serving", None),
        "memory": (["memory", "--pid", target_pid, "--duration", "60", "-o", out], r"gilty: ", out),
        "specialization": (["specialization", "--pid", target_pid, "--duration", "60", "-o", out], r"gilty: sampling", out),
        "specialization -s": (
            ["specialization", "-s", "--pid", target_pid, "--duration", "60", "-o", out],
            r"gilty: sampling",
            out,
        ),
        "load -- SERVER": (
            ["load", f"http://127.0.0.1:{port}/", "--rate", "20", "--duration", "60", "-o", out, "--", *server],
            r"gilty: loading at",
            out,
        ),
    }


def check_after(name: str, trial: Trial, how: str, out, tmp: Path) -> None:
    key = f"{name} / {how}"
    try:
        trial.proc.wait(timeout=SETTLE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        trial.proc.kill()
        trial.proc.wait()
        pytest.fail(f"{key}: gilty did not end within {SETTLE_TIMEOUT_S:g} s:\n{trial.output()[-2000:]}")
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    left = [p for p in trial.seen_children if running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if running(p)]
    for p in left:  # do not leave them to the next trial
        os.kill(p, signal.SIGKILL)
    text = trial.output()
    parts = sorted(p.name for p in tmp.glob(".*.part"))
    RESULTS[key] = {"exit": trial.proc.returncode, "children left": len(left), "part files": len(parts)}
    assert not left, f"{key}: children still running: {left}"
    if "CMD" in name or "SERVER" in name:
        # The command's own output shares gilty's stderr: only a traceback through gilty's code is gilty's.
        assert not re.search(r'File "[^"]*[/\\]gilty[/\\]', text), f"{key}:\n{text[-3000:]}"
    else:
        assert "Traceback" not in text, f"{key}:\n{text[-3000:]}"
    if how.startswith("Ctrl-C"):
        # -SIGINT: the signal came as the interpreter was finishing, after the report (Python restores
        # the default action then); quiet, and the file is whole (checked below).
        assert trial.proc.returncode in (0, 8, 130, -signal.SIGINT), f"{key}: exit {trial.proc.returncode}\n{text[-2000:]}"
        assert not parts, f"{key}: {parts}"
    if out is not None and out.exists():
        json.loads(out.read_text(encoding="utf-8"))  # a file that is there is whole
    for p in parts:
        (tmp / p).unlink()
    if out is not None and out.exists():
        out.unlink()


NAMES = [
    "record",
    "record -s",
    "record -- CMD",
    "top",
    "serve",
    "memory",
    "specialization",
    "specialization -s",
    "load -- SERVER",
]


@pytest.fixture(scope="module")
def target():
    with running_target(recording_interpreter(), "spinners.py") as proc:
        yield proc


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", ["Ctrl-C at start-up", "Ctrl-C mid-run", "kill -9 mid-run"])
def test_stop(name, how, target, tmp_path):
    argv, marker, out = commands(target.pid, tmp_path)[name]
    trial = Trial([str(a) for a in argv], tmp_path)
    if how.endswith("start-up"):
        trial.wait_for(trial.native_loaded, "loading its native module")
    else:
        trial.wait_for(lambda: re.search(marker, trial.output()), f"its running line ({marker})")
        time.sleep(0.3)  # into the run, not at its first line
        trial.seen_children |= descendants(trial.proc.pid)
    trial.proc.send_signal(signal.SIGKILL if how.startswith("kill") else signal.SIGINT)
    check_after(name, trial, how, out, tmp_path)
    assert target.alive(), "the target died"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["Ctrl-C", "kill -9"])
def test_stop_while_writing(sig, target, tmp_path):
    # A recording of many passes, stopped when its output file is being written.
    out = tmp_path / "out.json"
    trial = Trial(
        ["record", "--pid", str(target.pid), "--duration", "3", "--rate", "2000", "--format", "json", "-o", str(out)], tmp_path
    )
    trial.wait_for(lambda: any(tmp_path.glob(".*.part")) or out.exists(), "writing its output")
    trial.proc.send_signal(sig)
    check_after("record", trial, f"{'kill -9' if sig == signal.SIGKILL else 'Ctrl-C'} while writing", out, tmp_path)
    assert target.alive()


def test_print_counts(capsys):
    # Runs last in this module: the trials and what each left behind, for the record.
    with capsys.disabled():
        for key, result in sorted(RESULTS.items()):
            print(f"\n  {key}: {result}", end="")
