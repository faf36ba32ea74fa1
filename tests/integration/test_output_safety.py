"""Output files written as a root tool must (issue 30, items 1-4).

Root gilty writes into a sticky world-writable directory where an unprivileged user (made for this
module, removed after it) plants symlinks and files at the names gilty used to write through, with
fs.protected_symlinks 0 and 1. Also: `-o` through a symlink keeps the link, a bad `-o` is refused
before attaching, kill -9 mid-write leaves nothing, a second Ctrl-C while writing loses nothing, and
`specialization` stopped by Ctrl-C keeps what it read.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, assert_one_error_line, gilty_command, gilty_env, run_gilty, running_target
from formats_support import recording_interpreter

ROOT_ONLY = pytest.mark.root
PROTECTED = Path("/proc/sys/fs/protected_symlinks")
EARLY_S = 10.0  # a bad -o is refused this fast though asked to run 30 s (0.3-0.6 s alone; 2-5 s beside other suites)


@pytest.fixture(scope="module")
def target():
    with running_target(recording_interpreter(), "spinners.py") as proc:
        yield proc


@pytest.fixture(scope="module")
def saved(target, tmp_path_factory):
    """A saved recording: `gilty report saved.json -o ...` is a writer that needs no target."""
    path = tmp_path_factory.mktemp("saved") / "saved.json"
    rc, _, err = run_gilty("record", "--pid", target.pid, "--duration", "1", "-o", path)
    assert rc == 0, err
    os.chmod(path.parent, 0o755)
    os.chmod(path, 0o644)
    return path


@pytest.fixture(scope="module")
def planter():
    """An unprivileged user of its own, removed at the end: the one who plants."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to make an unprivileged user")
    name = f"gplant{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def sticky():
    """A directory like /tmp: sticky, world-writable, root's."""
    path = Path(tempfile.mkdtemp(prefix="gilty-sticky-", dir="/tmp"))
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=[0, 1], ids=["protected_symlinks=0", "protected_symlinks=1"])
def protected(request):
    if os.geteuid() != 0:
        pytest.skip("needs root to set fs.protected_symlinks")
    before = PROTECTED.read_text().strip()
    PROTECTED.write_text(str(request.param))
    try:
        yield request.param
    finally:
        PROTECTED.write_text(before)


def as_user(user, *argv: str) -> None:
    subprocess.run(list(argv), user=user.pw_uid, group=user.pw_gid, extra_groups=[], check=True, capture_output=True, timeout=10)


def victim_file(tmp_path: Path) -> Path:
    """A file of root's the planter cannot read or write, but can point a symlink at."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    return victim


def start_stopped(argv: list, **kwargs) -> subprocess.Popen:
    """gilty stopped before it starts (SIGCONT lets it run): its pid is known, as `ps` shows it to anyone."""
    shell = 'kill -STOP $$; exec "$@"'
    proc = subprocess.Popen(
        ["sh", "-c", shell, "sh", *gilty_command(), *map(str, argv)],
        env=gilty_env(),
        cwd=str(REPO),
        stdout=kwargs.pop("stdout", subprocess.PIPE),
        stderr=subprocess.PIPE,
        **kwargs,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return proc
        time.sleep(0.01)
    proc.kill()
    pytest.fail("the shell did not stop itself")


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple:
    os.kill(proc.pid, signal.SIGCONT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"gilty did not finish within {timeout:g} s: {err.decode(errors='replace')}")
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def guessable_names(name: str, pid: int) -> list:
    # The name gilty used (`.NAME.PID.part`) and the usual others a tool might use.
    return [
        f".{name}.{pid}.part",
        f".{name}.part",
        f"{name}.part",
        f"{name}.tmp",
        f".{name}.tmp",
        f".{name}.{pid}.tmp",
        f"{name}~",
    ]


# -- items 1 and 3: plants at the temporary file's name -------------------------------------


@ROOT_ONLY
@pytest.mark.parametrize("plant", ["symlink to root's file", "regular file of theirs"])
def test_plants_at_temporary_names_get_nothing(plant, planter, sticky, protected, saved, tmp_path):
    victim = victim_file(tmp_path)
    out = sticky / "r.json"
    proc = start_stopped(["report", saved, "-o", out])
    planted = [sticky / n for n in guessable_names(out.name, proc.pid)]
    for p in planted:
        if plant.startswith("symlink"):
            as_user(planter, "ln", "-s", str(victim), str(p))
        else:
            as_user(planter, "sh", "-c", f"umask 0; : > '{p}'")
    rc, _, err = finish(proc)
    assert rc == 0, err
    assert victim.read_text() == "precious\n", "root wrote into the victim through a planted symlink"
    st = out.lstat()
    assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, f"{out} is not root's regular file: {st}"
    json.loads(out.read_text())
    for p in planted:
        pst = p.lstat()
        assert pst.st_uid == planter.pw_uid, f"{p} was replaced"
        if stat.S_ISREG(pst.st_mode):
            assert pst.st_size == 0, f"the planter's {p.name} got the report"
    assert sorted(os.listdir(sticky)) == sorted([out.name] + [p.name for p in planted]), "a stray file was left"


# -- item 2: -o naming a symlink ----------------------------------------------------------


@ROOT_ONLY
def test_planted_symlink_to_a_fifo_is_refused_and_sends_nothing(planter, sticky, protected, saved):
    fifo = sticky / "fifo"
    out = sticky / "r.json"
    as_user(planter, "mkfifo", "-m", "666", str(fifo))
    as_user(planter, "ln", "-s", str(fifo), str(out))
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # whoever reads it would get the report
    try:
        started = time.monotonic()
        rc, _, err = run_gilty("report", saved, "-o", out, timeout=20)
        elapsed = time.monotonic() - started
        try:
            got = os.read(reader, 65536)
        except BlockingIOError:
            got = b""
    finally:
        os.close(reader)
    assert rc == 2, f"exit {rc}: {err}"
    assert "cannot write" in assert_one_error_line(err)
    assert got == b"", f"the FIFO's reader got {len(got)} bytes"
    assert out.is_symlink() and os.readlink(out) == str(fifo)
    assert elapsed < 10


@ROOT_ONLY
def test_planted_symlink_to_roots_file_is_refused(planter, sticky, protected, saved, tmp_path):
    victim = victim_file(tmp_path)
    out = sticky / "r.json"
    as_user(planter, "ln", "-s", str(victim), str(out))
    rc, _, err = run_gilty("report", saved, "-o", out)
    assert rc == 2, f"exit {rc}: {err}"
    assert_one_error_line(err)
    assert victim.read_text() == "precious\n"
    assert out.is_symlink() and os.readlink(out) == str(victim)


@ROOT_ONLY
def test_planted_symlink_to_a_directory_on_the_way_is_refused(planter, sticky, protected, saved, tmp_path):
    # /tmp/reports -> a directory of root's: `-o /tmp/reports/victim` must not replace root's file
    # there. The kernel's protected_symlinks leaves a link met mid-path alone where it is 0 (and
    # gilty opens the directory itself, one component at a time).
    victim = victim_file(tmp_path)
    reports = sticky / "reports"
    as_user(planter, "ln", "-s", str(tmp_path), str(reports))
    for out in (reports / "victim", reports / "new.json", reports / "." / "victim"):
        rc, _, err = run_gilty("report", saved, "--format", "json", "-o", out)
        assert rc == 2, f"exit {rc}: {err}"
        assert_one_error_line(err)
        assert f"{reports} is a symlink of uid {planter.pw_uid}" in err, err
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "new.json").exists()


def test_own_symlinks_to_directories_on_the_way_are_followed(saved, tmp_path):
    # gilty's user's own links, absolute and relative, one through another: written where they lead.
    (tmp_path / "real" / "deeper").mkdir(parents=True)
    (tmp_path / "abs").symlink_to(tmp_path / "real")
    (tmp_path / "rel").symlink_to("abs/deeper/..")
    for out in (tmp_path / "abs" / "deeper" / "a.json", tmp_path / "rel" / "b.json"):
        rc, _, err = run_gilty("report", saved, "-o", out)
        assert rc == 0, err
    assert json.loads((tmp_path / "real" / "deeper" / "a.json").read_text())["threads"]
    assert json.loads((tmp_path / "real" / "b.json").read_text())["threads"]
    rc, _, err = run_gilty("report", saved, "-o", tmp_path / "abs" / "missing" / "c.json")
    assert rc == 2 and f"no directory {tmp_path}/real/missing" in err, err


@ROOT_ONLY
def test_users_own_link_to_a_file_they_cannot_write_is_refused(planter, saved, tmp_path):
    # The planter's own directory: the link is theirs and so is the directory, but the file is not theirs.
    victim = victim_file(tmp_path)
    home = Path(tempfile.mkdtemp(prefix="gilty-home-", dir="/tmp"))
    try:
        os.chown(home, planter.pw_uid, planter.pw_gid)
        out = home / "r.json"
        as_user(planter, "ln", "-s", str(victim), str(out))
        rc, _, err = run_gilty("report", saved, "-o", out)
        assert rc == 2, f"exit {rc}: {err}"
        assert_one_error_line(err)
        assert victim.read_text() == "precious\n"
        assert out.is_symlink()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_symlink_to_a_regular_file_writes_the_file_and_keeps_the_link(saved, tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "r.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    rc, _, err = run_gilty("report", saved, "-o", link)
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)
    json.loads(real.read_text())
    assert sorted(os.listdir(real_dir)) == ["r.json"] and sorted(os.listdir(tmp_path)) == ["link.json", "real"]


def _dev_stdout_intact() -> bool:
    return os.path.islink("/dev/stdout")


@pytest.fixture
def dev_stdout():
    """/dev/stdout as the system has it, put back if a run broke it."""
    before = os.readlink("/dev/stdout") if _dev_stdout_intact() else "/proc/self/fd/1"
    try:
        yield
    finally:
        if not _dev_stdout_intact() and os.geteuid() == 0:
            os.unlink("/dev/stdout")
            os.symlink(before, "/dev/stdout")


def test_dev_stdout_is_written_in_place_and_stays_a_link(saved, tmp_path, dev_stdout):
    # stdout a file (where /dev/stdout was replaced), then a pipe: the report arrives there, the link stays.
    if not _dev_stdout_intact():
        pytest.skip("/dev/stdout is not a symlink on this machine")
    argv = [*gilty_command(), "report", str(saved), "--format", "json", "-o", "/dev/stdout"]
    sink = tmp_path / "stdout.json"
    with open(sink, "wb") as f:
        proc = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, env=gilty_env(), cwd=str(REPO), timeout=60)
    assert _dev_stdout_intact(), "/dev/stdout was replaced by a file"
    assert proc.returncode == 0, proc.stderr.decode()
    json.loads(sink.read_text())
    proc = subprocess.run(argv, capture_output=True, env=gilty_env(), cwd=str(REPO), timeout=60)
    assert _dev_stdout_intact()
    assert proc.returncode == 0, proc.stderr.decode()
    json.loads(proc.stdout)


# -- item 4: checked before attaching -------------------------------------------------------


def commands(pid: int, saved: Path, out: str) -> dict:
    return {
        "record": ["record", "--pid", pid, "--duration", "30", "-o", out],
        "record -s": ["record", "-s", "--pid", pid, "--duration", "30", "-o", out],
        "memory": ["memory", "--pid", pid, "--duration", "30", "-o", out],
        "specialization": ["specialization", "--pid", pid, "--duration", "30", "-o", out],
        "load": ["load", "http://127.0.0.1:9/", "--rate", "5", "--duration", "30", "-o", out],
        "report": ["report", saved, "-o", out],
        "compare": ["compare", saved, saved, "-o", out],
    }


@pytest.mark.parametrize("where", ["/nodir/x.json", "directory", "file/x.json"])
@pytest.mark.parametrize("name", ["record", "record -s", "memory", "specialization", "load", "report", "compare"])
def test_bad_output_is_refused_before_any_work(name, where, target, saved, tmp_path):
    (tmp_path / "file").write_text("")
    out = {
        "/nodir/x.json": "/nodir/x.json",
        "directory": str(tmp_path / "d.json"),
        "file/x.json": str(tmp_path / "file" / "x.json"),
    }[where]
    if where == "directory":
        os.mkdir(out)
    started = time.monotonic()
    rc, stdout, err = run_gilty(*commands(target.pid, saved, out)[name], timeout=20)
    elapsed = time.monotonic() - started
    assert rc == 2, f"exit {rc}: {err}"
    line = assert_one_error_line(err)
    assert "cannot write" in line
    assert elapsed < EARLY_S, f"refused after {elapsed:.1f} s"
    assert stdout == ""


# -- items 3 and 4: kill -9 and a second Ctrl-C while writing ------------------------------


def writing_into(pid: int, directory: Path, before: set) -> bool:
    """gilty has a file open in ``directory``, or a new name appeared there."""
    if set(os.listdir(directory)) - before:
        return True
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(str(directory) + "/"):
                return True
        except OSError:
            pass
    return False


def test_kill_9_while_writing_leaves_nothing(target, tmp_path):
    # The JSON report is rendered as it is written: its file is open for a while, long enough to be seen.
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "r.json"
    argv = ["record", "--pid", str(target.pid), "--duration", "2", "--rate", "2000", "--format", "json", "-o", str(out)]
    proc = subprocess.Popen(
        [*gilty_command(), *argv], env=gilty_env(), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not writing_into(proc.pid, out_dir, set()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert proc.poll() is None, "the write was over before it was seen"
        proc.kill()
    finally:
        proc.kill()
        proc.wait()
    assert os.listdir(out_dir) in ([], ["r.json"]), f"left behind: {os.listdir(out_dir)}"
    if out.exists():  # the kill came after the file was whole and in place
        json.loads(out.read_text())


class Running:
    """A gilty command whose stderr is collected as it comes, so a test can wait for a line."""

    def __init__(self, argv: list, stdout=subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen(
            [*gilty_command(), *map(str, argv)], env=gilty_env(), cwd=str(REPO), stdout=stdout, stderr=subprocess.PIPE
        )
        self.err: list = []
        self._reader = threading.Thread(
            target=lambda: self.err.extend(line.decode(errors="replace") for line in self.proc.stderr), daemon=True
        )
        self._reader.start()

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.err):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no {text!r} on gilty's stderr: {''.join(self.err)}")
            time.sleep(0.02)

    def end(self, timeout: float = 60) -> str:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            self.proc.kill()
            self.proc.wait()
            self._reader.join(5)
        return "".join(self.err)


def test_second_ctrl_c_while_writing_still_writes_the_report(target, tmp_path):
    # The report goes to a FIFO whose pipe holds 4 KiB and is not read until the second Ctrl-C: once
    # its first bytes are there, gilty is inside its write and stays there, however fast the machine
    # (a sleep, or watching its descriptors, missed a write that took a few ms).
    out = tmp_path / "r.html"
    os.mkfifo(out)
    reader = os.open(out, os.O_RDONLY | os.O_NONBLOCK)  # a reader from the start: gilty's open does not wait
    try:
        fcntl.fcntl(reader, fcntl.F_SETPIPE_SZ, 4096)
        run = Running(["record", "--pid", target.pid, "--rate", "2000", "--duration", "60", "-o", out])
        run.wait_for("gilty: recording")
        time.sleep(3.0)
        run.proc.send_signal(signal.SIGINT)  # ends the recording
        readable, _, _ = select.select([reader], [], [], 60)
        assert readable and run.proc.poll() is None, "no report began before gilty ended"
        run.proc.send_signal(signal.SIGINT)
        time.sleep(0.2)  # delivered while the write waits for the pipe
        os.set_blocking(reader, True)
        chunks = []
        while chunk := os.read(reader, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(reader)
    err = run.end()
    page = b"".join(chunks)
    assert run.proc.returncode == 0, f"exit {run.proc.returncode}: {err}"
    assert "Traceback" not in err
    assert "finishing" in err and f"gilty: wrote {out}" in err, err
    assert len(page) > 4096 and page.rstrip().endswith(b"</html>"), len(page)


def test_specialization_ctrl_c_keeps_what_it_read(target):
    run = Running(["specialization", "--pid", target.pid, "--duration", "60", "--format", "json"], stdout=subprocess.PIPE)
    run.wait_for("gilty: sampling")
    time.sleep(1.5)
    stopped = time.monotonic()
    run.proc.send_signal(signal.SIGINT)
    out = run.proc.stdout.read()
    err = run.end(timeout=20)
    after = time.monotonic() - stopped
    assert run.proc.returncode == 0, f"exit {run.proc.returncode}: {err}"
    doc = json.loads(out)
    assert after < 5, f"{after:.1f} s after Ctrl-C"
    session = doc["session"]
    assert "Ctrl-C" in (session["partial_reason"] or ""), session["partial_reason"]
    assert session["processes"] and session["processes"][0]["passes"] > 0
