"""Files a target names (its code objects' file names) and files an operator names (`gilty report
FILE`) are read safely by root gilty: never a file the target's user could not read, never outside the
target's root, never a FIFO or a device (no hang, no memory growth), and a saved report never reads one.

Guards issue 30 items 5 and 6: a target compiled with ``co_filename="/etc/shadow"`` made root gilty
print a line of /etc/shadow in text, JSON and HTML; a FIFO hung it for ever (Ctrl-C ignored), /dev/zero
grew it by ~400 MB/s, and a hand-edited report did the same to `gilty report`; `gilty report FIFO` and
`gilty compare FIFO` hung."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
from conftest import assert_one_error_line, gilty_command, gilty_env, note, one_version, running_target

pytestmark = [pytest.mark.root, pytest.mark.interpreter]

MARKER = "gilty_root_only_marker_7f3a"  # every line of the root-only file, in no other file
OUTSIDE = "gilty_outside_root_marker_c41e"  # every line of a file outside the chrooted target's root
SHOWN = "shown_line_here = 3"  # line 3 of a file the target's user may read: still shown
JAILED = "jailed_line_here = 3"  # line 3 of /shown.py inside the chroot (no such file outside it)
# A run that blocks is killed at this deadline (a machine busy with other tests starts gilty in ~4 s).
DEADLINE_S = 40.0
# gilty specialization peaks near 60 MB; /dev/zero read whole passed 1 GB in 3 s. Killed beyond the cap.
MAX_RSS_MB = 300
# A refusal is a start-up and one fstat: 0.3 s on a quiet machine, ~4 s beside a busy suite.
REFUSE_S = 15.0
KILL_RSS_MB = 1000


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_watched(*args, timeout: float = DEADLINE_S) -> dict:
    """Run gilty; {"rc", "out", "err", "seconds", "max_rss_mb", "stopped": why it was killed or None}."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    start = time.monotonic()
    popen = subprocess.Popen(
        gilty_command() + [str(a) for a in args], stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=gilty_env()
    )
    stopped, status, rusage = None, None, None
    while status is None:
        pid, st, ru = os.wait4(popen.pid, os.WNOHANG)
        if pid:
            status, rusage = st, ru
            break
        if time.monotonic() - start > timeout:
            stopped = f"still running after {timeout:g} s"
        elif _rss_mb(popen.pid) > KILL_RSS_MB:
            stopped = f"grew past {KILL_RSS_MB} MB"
        if stopped:
            os.kill(popen.pid, signal.SIGKILL)
            _, status, rusage = os.wait4(popen.pid, 0)
            break
        time.sleep(0.02)
    popen.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    return {
        "rc": popen.returncode,
        "out": out.read().decode("utf-8", "replace"),
        "err": err.read().decode("utf-8", "replace"),
        "seconds": time.monotonic() - start,
        "max_rss_mb": rusage.ru_maxrss / 1024,
        "stopped": stopped,
    }


@pytest.fixture(scope="module")
def user():
    """An unprivileged user made for this module (uid, gid), removed after it."""
    name = f"gilty-src-{os.getpid()}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture(scope="module")
def plants():
    """A world-searchable directory: a root-only file (0600), a FIFO, a readable control file, a file
    outside the jail, and the jail (a chroot) holding its own /shown.py and a link to the outside file."""
    top = tempfile.mkdtemp(prefix="gilty-plants-")
    os.chmod(top, 0o755)
    paths = {name: os.path.join(top, name) for name in ("secret.py", "fifo", "shown.py", "outside.py", "jail")}
    with open(paths["secret.py"], "w") as f:
        f.write("".join(f"{MARKER} = {i}\n" for i in range(40)))
    os.chmod(paths["secret.py"], 0o600)
    os.mkfifo(paths["fifo"], 0o666)
    os.chmod(paths["fifo"], 0o666)
    with open(paths["shown.py"], "w") as f:
        f.write(f"a = 1\nb = 2\n{SHOWN}\n")
    with open(paths["outside.py"], "w") as f:
        f.write("".join(f"{OUTSIDE} = {i}\n" for i in range(40)))
    os.chmod(paths["shown.py"], 0o644)
    os.chmod(paths["outside.py"], 0o644)
    os.mkdir(paths["jail"], 0o755)
    with open(os.path.join(paths["jail"], "shown.py"), "w") as f:
        f.write(f"x = 1\ny = 2\n{JAILED}\n")
    os.chmod(os.path.join(paths["jail"], "shown.py"), 0o644)
    os.symlink(paths["outside.py"], os.path.join(paths["jail"], "inside.py"))  # absolute: outside, seen from gilty
    try:
        yield paths
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _secrets() -> list:
    """What must never appear: the root-only marker, the outside marker, every line of /etc/shadow."""
    with open("/etc/shadow") as f:
        shadow = [line.strip() for line in f if len(line.strip()) >= 8]
    return [MARKER, OUTSIDE] + shadow


def _leaks(text: str) -> list:
    return [s for s in _secrets() if s in text]


@pytest.fixture(scope="module")
def runs(interp, user, plants, tmp_path_factory):
    """`gilty specialization` as text, JSON and HTML on a target (run as ``user``) whose hot code
    names /etc/shadow, a root-only file, a FIFO, /dev/zero and a readable file; as JSON on one naming
    /dev/zero alone, and on a chrooted one naming a file outside its root, a link to it, and a file
    inside it."""
    one_version(interp, "reading the files a target names is the same on every version")
    if interp.version[:2] < (3, 11):
        pytest.skip("specialization needs Python 3.11+")
    out_dir = tmp_path_factory.mktemp("source-reads")
    who = f"{user[0]}:{user[1]}"
    results = {}
    with running_target(
        interp.path,
        "hostile_sources.py",
        "--user",
        who,
        "/etc/shadow",
        plants["secret.py"],
        plants["fifo"],
        "/dev/zero",
        plants["shown.py"],
    ) as proc:
        for fmt in ("text", "json", "html"):
            output = out_dir / f"spec.{fmt}"
            r = run_watched("specialization", "--pid", proc.pid, "--duration", "1", "--format", fmt, "-o", output)
            r["file"] = output.read_text(encoding="utf-8", errors="replace") if output.exists() else ""
            results[fmt] = r
    # /dev/zero alone: behind the FIFO, a blocking reader would never reach it.
    with running_target(interp.path, "hostile_sources.py", "--user", who, "/dev/zero") as proc:
        results["zero"] = run_watched("specialization", "--pid", proc.pid, "--duration", "1", "--format", "json")
        results["zero"]["file"] = results["zero"]["out"]
    with running_target(
        interp.path,
        "hostile_sources.py",
        "--chroot",
        plants["jail"],
        "--user",
        who,
        plants["outside.py"],
        "/inside.py",
        "/shown.py",
    ) as proc:
        output = out_dir / "jail.json"
        r = run_watched("specialization", "--pid", proc.pid, "--duration", "1", "--format", "json", "-o", output)
        r["file"] = output.read_text(encoding="utf-8", errors="replace") if output.exists() else ""
        results["jail"] = r
    results["dir"] = out_dir
    return results


def _finished(r: dict) -> None:
    assert r["stopped"] is None, f"gilty {r['stopped']} (peak {r['max_rss_mb']:.0f} MB); stderr:\n{r['err'][-2000:]}"
    assert r["rc"] == 0, f"exit {r['rc']}; stderr:\n{r['err'][-2000:]}"


def _sites(r: dict) -> dict:
    """file name -> (source, source_not_shown) of its line-3 site (the polymorphic ``o.x``)."""
    report = json.loads(r["file"])
    return {s["filename"]: (s["source"], s["source_not_shown"]) for s in report["sites"] if s["line"] == 3}


@pytest.mark.parametrize("fmt", ["text", "json", "html", "zero", "jail"])
def test_specialization_never_blocks_grows_or_leaks(runs, interp, fmt):
    r = runs[fmt]
    _finished(r)
    note(interp, f"source reads: {fmt} max RSS MB", round(r["max_rss_mb"]))
    assert r["max_rss_mb"] < MAX_RSS_MB, f"gilty peaked at {r['max_rss_mb']:.0f} MB"
    leaked = _leaks(r["file"] + r["out"] + r["err"])
    assert not leaked, f"{fmt} output shows {len(leaked)} line(s) the target's user cannot read: {leaked[:1]}"


def test_refused_files_are_said_so_in_every_format(runs, plants):
    for fmt in ("text", "json", "html"):
        _finished(runs[fmt])
    sites = _sites(runs["json"])
    assert sites[plants["shown.py"]] == (SHOWN, ""), "a file the target's user can read is still shown"
    assert sites["/etc/shadow"] == ("", "the target's user cannot read it")
    assert sites[plants["secret.py"]] == ("", "the target's user cannot read it")
    assert sites[plants["fifo"]] == ("", "not a regular file")
    assert sites["/dev/zero"] == ("", "not a regular file")
    text = runs["text"]["file"]
    assert "(source not shown: the target's user cannot read it)" in text
    assert "source not shown for /dev/zero: not a regular file" in text
    assert SHOWN in text
    page = runs["html"]["file"]
    data = re.search(r'<script[^>]*id="gilty-data"[^>]*>(.*?)</script>', page, re.S)
    assert data, "the page carries its data"
    functions = json.loads(data.group(1))["specialization"]["functions"]
    why = {f["filename"]: f["source_not_shown"] for f in functions}
    assert why[plants["fifo"]] == "not a regular file" and why["/etc/shadow"] == "the target's user cannot read it"
    assert why[plants["shown.py"]] == ""


def test_file_names_resolve_inside_the_targets_root(runs, plants):
    r = runs["jail"]
    _finished(r)
    sites = _sites(r)
    assert sites["/shown.py"] == (JAILED, ""), "the target's /shown.py is the one in its chroot"
    assert sites[plants["outside.py"]] == ("", "no such file in the target's root")
    assert sites["/inside.py"] == ("", "no such file in the target's root"), "a link in the root stays in it"


def test_a_saved_report_reads_no_file(runs, plants):
    """`gilty report` shows the lines kept in the report; a hand-edited one naming a FIFO, /dev/zero
    and the root-only file (its kept lines removed) reads none of them."""
    _finished(runs["json"])
    saved = runs["dir"] / "spec.json"
    again = run_watched("report", saved, timeout=DEADLINE_S)
    _finished(again)
    assert SHOWN in again["out"] and "(source not shown: the target's user cannot read it)" in again["out"]
    doc = json.loads(runs["json"]["file"])
    hostile = [plants["fifo"], "/dev/zero", plants["secret.py"], "/etc/shadow"]
    for w in doc["session"]["processes"]:
        w.pop("sources", None)
        for i, code in enumerate(w["codes"]):
            code["filename"] = hostile[i % len(hostile)]
    edited = runs["dir"] / "edited.json"
    edited.write_text(json.dumps(doc))
    for fmt in ("text", "html"):
        r = run_watched("report", edited, "--format", fmt, timeout=DEADLINE_S)
        _finished(r)
        assert r["max_rss_mb"] < MAX_RSS_MB
        assert not _leaks(r["out"]), f"gilty report {fmt} of an edited report printed a file's line"


@pytest.mark.parametrize("command", [("report", "{fifo}"), ("compare", "{fifo}", "{fifo}"), ("report", "/dev/zero")])
def test_report_and_compare_refuse_a_fifo_or_device(plants, command):
    args = [a.format(fifo=plants["fifo"]) for a in command]
    r = run_watched(*args, timeout=DEADLINE_S)
    assert r["stopped"] is None, f"gilty {' '.join(args)}: {r['stopped']}"
    assert r["seconds"] < REFUSE_S, f"took {r['seconds']:.1f} s"
    assert r["rc"] == 2, f"exit {r['rc']}; stderr:\n{r['err']}"
    line = assert_one_error_line(r["err"])
    assert "not a regular file" in line
    assert r["out"] == ""


# The same plant one level down: the libraries a target maps are named by its maps, and a deleted
# one is named "PATH (deleted)", a name the target may then create. A FIFO there hung `gilty dump`.
def test_a_fifo_planted_as_a_deleted_library_blocks_nothing(interp, tmp_path, monkeypatch):
    one_version(interp, "opening the files a target maps is the same on every version")
    lib = os.path.join(os.path.dirname(os.path.dirname(interp.path)), "lib", f"libpython{interp.minor_str}.so.1.0")
    if not os.path.exists(lib):
        pytest.skip(f"{interp.path} has no shared libpython to plant beside")
    copy = tmp_path / os.path.basename(lib)
    shutil.copy(lib, copy)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    with running_target(interp.path, "hostile_sources.py", "--fifo-for", str(copy), "/dev/null") as proc:
        with open(f"/proc/{proc.pid}/maps") as f:
            assert f"{copy} (deleted)" in f.read(), "the target maps the copied library"
        r = run_watched("dump", "--pid", proc.pid)
    assert r["stopped"] is None, f"gilty dump {r['stopped']}; stderr:\n{r['err'][-2000:]}"
    assert r["rc"] == 0 or len(r["err"].strip().splitlines()) == 1, r["err"][-2000:]
