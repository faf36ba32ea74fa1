"""Shared test machinery: the CPython interpreters found on this machine, target processes, running the CLI.

Integration tests that take an ``interp`` argument run once per interpreter (ids like ``3.12.1`` or
``debian-3.11``). An interpreter that is not installed becomes a skipped test with the reason, never
a silent pass; the session ends with a list of what was tested and what was skipped.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

# A suite started in the background of a script (`cmd &`, nohup) inherits SIGINT and SIGQUIT ignored,
# and so would every gilty and target it starts: the Ctrl-C trials would then test nothing but that,
# and a target sent SIGQUIT for a kernel core would not dump one (test_core_files waited 60 s on 3.14
# and 3.15 in two such runs). A terminal's foreground process has both at the default, which is what
# the tests stand for.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)

REPO = Path(__file__).resolve().parent.parent
TARGETS = REPO / "tests" / "targets"
VENV_GILTY = REPO / ".venv" / "bin" / "gilty"

# Only a ceiling: a target is used as soon as it prints "ready". At load average ~50 (the 2-CPU test
# machine shared with builds) imports alone took over 10 s.
READY_TIMEOUT_S = 30.0
CLI_TIMEOUT_S = 60.0

# Minor versions gilty supports, each looked for as a pyenv build; those of SID_MINORS that pyenv lacks are
# taken from Debian sid's packages, unpacked by tools/sid_pythons.py (`make sid-pythons`).
SUPPORTED_MINORS = ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")
SID_MINORS = ("3.14", "3.15")
# Older pyenv builds: targets for the "unsupported interpreter" test.
UNSUPPORTED_MINORS = ("3.9", "3.8", "3.7", "3.6")
DEBIAN_PYTHON = Path("/usr/bin/python3.11")


@dataclass(frozen=True)
class Interpreter:
    id: str  # test id: "3.12.1" for pyenv builds, "debian-3.11" for the system Python
    path: Optional[str]  # None when not installed
    version: Optional[tuple] = None  # sys.version_info[:3] as reported by the interpreter itself
    skip_reason: Optional[str] = None

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "?"

    @property
    def minor_str(self) -> str:
        return ".".join(map(str, self.version[:2])) if self.version else "?"


def pyenv_root() -> Path:
    exe = shutil.which("pyenv")
    if exe:
        try:
            out = subprocess.run([exe, "root"], capture_output=True, text=True, timeout=10, check=True).stdout.strip()
            if out:
                return Path(out)
        except (OSError, subprocess.SubprocessError):
            pass
    return Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))


def _probe_version(path: str) -> Optional[tuple]:
    try:
        out = subprocess.run(
            [path, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
        return tuple(int(x) for x in out.split("."))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _pyenv_builds(minor: str) -> list:
    """Release builds ``<minor>.<micro>`` under pyenv's versions/ (no -dev, no free-threaded 't'), newest last."""
    versions = pyenv_root() / "versions"
    pattern = re.compile(rf"^{re.escape(minor)}\.(\d+)$")
    found = []
    if versions.is_dir():
        for entry in versions.iterdir():
            m = pattern.match(entry.name)
            if m and (entry / "bin" / "python3").exists():
                found.append((int(m.group(1)), entry))
    return [entry for _, entry in sorted(found)]


def _sid_tools():
    spec = importlib.util.spec_from_file_location("sid_pythons", REPO / "tools" / "sid_pythons.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _sid_interpreter(minor: str) -> Interpreter:
    """Debian sid's build of ``minor`` from tools/sid_pythons.py's stamp, or a skipped id with the script's reason."""
    sid = _sid_tools()
    stamp = sid.read_stamp()
    info = (stamp or {}).get("interpreters", {}).get(minor)
    if info is None:
        try:
            reason = sid.REASON.read_text().strip().replace("\n", "; ")
        except OSError:
            reason = f"no stamp at {sid.STAMP}"
        return Interpreter(
            id=f"{minor}-missing",
            path=None,
            skip_reason=f"pyenv {minor} not installed and sid's python{minor} not built (make sid-pythons, as root): {reason}",
        )
    version = _probe_version(info["exe"])
    if version is None:
        return Interpreter(id=info["version"], path=None, skip_reason=f"sid's python{minor} at {info['exe']} does not run")
    return Interpreter(id=".".join(map(str, version)), path=info["exe"], version=version)


def discover_interpreters() -> list:
    result = []
    for minor in SUPPORTED_MINORS:
        builds = _pyenv_builds(minor)
        if not builds and minor in SID_MINORS:
            result.append(_sid_interpreter(minor))
            continue
        if not builds:
            result.append(Interpreter(id=f"{minor}-missing", path=None, skip_reason=f"pyenv {minor} not installed"))
            continue
        entry = builds[-1]  # one build per minor version: the newest
        path = str(entry / "bin" / "python3")
        version = _probe_version(path)
        if version is None:
            result.append(Interpreter(id=entry.name, path=None, skip_reason=f"pyenv {entry.name} does not run"))
        else:
            result.append(Interpreter(id=entry.name, path=path, version=version))
    if DEBIAN_PYTHON.exists():
        version = _probe_version(str(DEBIAN_PYTHON))
        if version is None:
            result.append(Interpreter(id="debian-3.11", path=None, skip_reason=f"{DEBIAN_PYTHON} does not run"))
        else:
            result.append(Interpreter(id="debian-3.11", path=str(DEBIAN_PYTHON), version=version))
    else:
        result.append(Interpreter(id="debian-3.11", path=None, skip_reason=f"Debian python3.11 not installed ({DEBIAN_PYTHON})"))
    return result


def discover_unsupported() -> Optional[Interpreter]:
    """The newest pyenv build older than 3.10, if any."""
    for minor in UNSUPPORTED_MINORS:
        builds = _pyenv_builds(minor)
        if builds:
            path = str(builds[-1] / "bin" / "python3")
            version = _probe_version(path)
            if version is not None:
                return Interpreter(id=builds[-1].name, path=path, version=version)
    return None


INTERPRETERS = discover_interpreters()
AVAILABLE = [i for i in INTERPRETERS if i.path]

# Per-interpreter test outcomes, for the summary at the end.
_OUTCOMES: dict = defaultdict(Counter)
# Measured values the thresholds are checked against: {metric: {interp id: [values]}}.
_MEASURED: dict = defaultdict(lambda: defaultdict(list))
# What note() was given since the current test started. It travels to the summary in the test's
# teardown report, the one channel that also crosses from a parallel worker to the main process.
_NOTED: list = []
_INTERP_PROPERTY = "gilty_interpreter"
_NOTED_PROPERTY = "gilty_measured"


def note(interp, metric: str, value) -> None:
    """Remember a measured value (shown at the end of the session) so thresholds can be re-derived."""
    if value is not None:
        _NOTED.append((metric, interp.id if isinstance(interp, Interpreter) else str(interp), value))


# The interpreter that version-independent checks run on: each of them once, not per version.
ONE_VERSION = "3.12"


def one_version(interp, what: str) -> None:
    """Skips unless ``interp`` is pyenv's 3.12, for a check that reads nothing version-specific (output
    formats, CLI errors, process lifecycle, kernel behaviour): ``what`` says why it is such a check.
    The version-specific reads it also touches are checked on every version by other tests."""
    if interp.id.startswith("debian") or interp.minor_str != ONE_VERSION:
        pytest.skip(f"{what}: checked on pyenv {ONE_VERSION} only (suite time)")


def _interp_params() -> list:
    params = []
    for interp in INTERPRETERS:
        marks = [pytest.mark.interpreter]
        if interp.path is None:
            marks.append(pytest.mark.skip(reason=interp.skip_reason))
        params.append(pytest.param(interp, id=interp.id, marks=marks))
    return params


def pytest_generate_tests(metafunc):
    # Module scope: each module's per-interpreter fixtures (target processes, recordings) are made
    # once per interpreter, and pytest groups a module's tests by interpreter.
    if "interp" in metafunc.fixturenames:
        metafunc.parametrize("interp", _interp_params(), scope="module")


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "interp" in callspec.params:
            item.user_properties.append((_INTERP_PROPERTY, callspec.params["interp"].id))
        if item.get_closest_marker("root") and os.geteuid() != 0:
            item.add_marker(pytest.mark.skip(reason="needs root (run the suite as root to test other users' access)"))


def pytest_runtest_logstart(nodeid, location):
    _NOTED.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown" and _NOTED:
        outcome.get_result().user_properties.append((_NOTED_PROPERTY, list(_NOTED)))
        _NOTED.clear()


def pytest_runtest_logreport(report):
    # Runs where the reports arrive: in the one process, or in the main one of a parallel run.
    properties = dict(report.user_properties)
    for metric, interp_id, value in properties.get(_NOTED_PROPERTY, ()):
        _MEASURED[metric][interp_id].append(value)
    interp_id = properties.get(_INTERP_PROPERTY)
    if interp_id is None:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _OUTCOMES[interp_id][report.outcome] += 1


def _cell(values: list) -> str:
    def fmt(v) -> str:
        return str(v) if isinstance(v, int) else f"{v:.3g}"

    if not all(isinstance(v, (int, float)) for v in values):  # a noted word: the distinct ones
        return "/".join(dict.fromkeys(str(v) for v in values))
    lo, hi = min(values), max(values)
    return fmt(lo) if lo == hi else f"{fmt(lo)}..{fmt(hi)}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _OUTCOMES:
        return
    tr = terminalreporter
    tr.section("gilty: interpreters")
    for interp in INTERPRETERS:
        counts = _OUTCOMES.get(interp.id, Counter())
        if interp.path is None:
            tr.write_line(f"SKIPPED  {interp.id:<14} {interp.skip_reason}")
            continue
        if counts["passed"] + counts["failed"]:
            label = "TESTED "
        elif counts["skipped"]:
            label = "SKIPPED"
        else:
            label = "NOT RUN"
        detail = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no tests selected"
        tr.write_line(f"{label}  {interp.id:<14} Python {interp.version_str} at {interp.path}: {detail}")
    unsupported = discover_unsupported()
    tr.write_line(
        f"unsupported-interpreter check: {unsupported.id} at {unsupported.path}"
        if unsupported
        else "unsupported-interpreter check: no pyenv build older than 3.10 installed"
    )
    if _MEASURED:
        tr.section("gilty: measured values behind the thresholds")
        ids = [i.id for i in INTERPRETERS if i.path]
        tr.write_line(f"{'metric':<36}" + "".join(f"{i:>18}" for i in ids))
        for metric in sorted(_MEASURED):
            row = "".join(f"{_cell(_MEASURED[metric][i]) if _MEASURED[metric].get(i) else '-':>18}" for i in ids)
            tr.write_line(f"{metric:<36}{row}")


# -- target processes -------------------------------------------------------------------------


class TargetProcess:
    """A target script running under one interpreter; ``pid`` is the Python process."""

    def __init__(self, popen: subprocess.Popen, script: Path, stderr_path: str) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.script = script
        self._stderr_path = stderr_path
        self._buf = b""

    def stderr_text(self) -> str:
        try:
            with open(self._stderr_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def read_line(self, timeout: float) -> bytes:
        """The next line of the target's stdout (without the newline); what arrived so far on timeout."""
        fd = self.popen.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                self._buf += chunk
        if b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
        else:
            line, self._buf = self._buf, b""
        return line

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        """Kill and reap (idempotent)."""
        if self.popen.poll() is None:
            try:
                self.popen.kill()
            except ProcessLookupError:
                pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.popen.stdout:
            self.popen.stdout.close()
        try:
            os.unlink(self._stderr_path)
        except OSError:
            pass


def start_target(interpreter: str, script: str, *args: str, timeout: float = READY_TIMEOUT_S) -> TargetProcess:
    """Start ``tests/targets/<script>`` and wait for its "ready" line. The caller must ``stop()`` it."""
    path = TARGETS / script
    assert path.exists(), f"no target script {path}"
    fd, stderr_path = tempfile.mkstemp(prefix="gilty-target-", suffix=".err")
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    for var in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"):
        env.pop(var, None)
    popen = subprocess.Popen(
        [interpreter, str(path), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=fd, env=env
    )
    os.close(fd)
    proc = TargetProcess(popen, path, stderr_path)
    try:
        line = proc.read_line(timeout)
    except BaseException:
        proc.stop()
        raise
    if line.strip() != b"ready":
        err = proc.stderr_text()
        proc.stop()
        pytest.fail(f"{script} under {interpreter} did not print 'ready' within {timeout:g} s (got {line!r}); stderr:\n{err}")
    return proc


class _Targets:
    """Starts targets and stops every one of them at teardown."""

    def __init__(self) -> None:
        self.started: list = []

    def __call__(self, interpreter, script: str, *args: str) -> TargetProcess:
        path = interpreter.path if isinstance(interpreter, Interpreter) else interpreter
        proc = start_target(path, script, *args)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            proc.stop()
        self.started.clear()


@pytest.fixture
def targets():
    """``targets(interp, "script.py")`` starts a target for this test; all are killed and reaped after it."""
    t = _Targets()
    yield t
    t.stop_all()


@contextlib.contextmanager
def running_target(interpreter, script: str, *args: str):
    """``with running_target(interp, "x.py") as proc:`` for module-scoped fixtures: killed and reaped on exit."""
    t = _Targets()
    try:
        yield t(interpreter, script, *args)
    finally:
        t.stop_all()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (servers started by tests bind it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium over DevTools (tests/integration/test_html_chromium.py), one per test module."""
    from test_html_chromium import CHROMIUM, Browser

    if CHROMIUM is None:
        pytest.skip("chromium not installed (make system-deps installs it)")
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


# -- running gilty ----------------------------------------------------------------------------


def gilty_command() -> list:
    if VENV_GILTY.exists():
        return [str(VENV_GILTY)]
    return [sys.executable, "-m", "gilty"]


def gilty_env() -> dict:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    env.pop("GILTY_DEBUG", None)
    if not VENV_GILTY.exists():
        env["PYTHONPATH"] = str(REPO / "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_gilty(*args, timeout: float = CLI_TIMEOUT_S, argv: Optional[list] = None) -> tuple:
    """Run the CLI with ``args`` (or the whole ``argv``); returns (returncode, stdout, stderr) as text."""
    cmd = argv if argv is not None else gilty_command() + [str(a) for a in args]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=gilty_env(), cwd=str(REPO))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"gilty did not finish within {timeout:g} s: {cmd}\nstdout: {e.stdout!r}\nstderr: {e.stderr!r}")
    return (
        proc.returncode,
        proc.stdout.decode("utf-8", errors="replace"),
        proc.stderr.decode("utf-8", errors="replace"),
    )


def parse_json(stdout: str, what: str = "gilty output") -> dict:
    try:
        return json.loads(stdout)
    except ValueError as e:
        pytest.fail(f"{what} is not JSON ({e}):\n{stdout[:2000]}")


def record_json(pid: int, duration: float = 3.0, rate: float = 500.0, extra: tuple = ()) -> dict:
    """``gilty record --pid PID --format json``; fails the test unless it exits 0."""
    rc, out, err = run_gilty("record", "--pid", pid, "--duration", duration, "--rate", rate, "--format", "json", *extra)
    assert rc == 0, f"gilty record exited {rc}; stderr:\n{err}"
    return parse_json(out, "gilty record --format json")


def assert_one_error_line(stderr: str) -> str:
    """stderr is exactly one line, starting ``gilty: error:``, and holds no traceback; returns it."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{stderr}"
    assert lines[0].startswith("gilty: error:"), lines[0]
    return lines[0]


def proc_state(pid: int) -> dict:
    """What "unharmed" means for a target: alive, the same run state per thread, not traced or stopped."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        threads[int(task.name)] = stat[stat.rfind(")") + 2]
    return {"state": fields["State"].strip()[0], "tracer": int(fields["TracerPid"]), "threads": threads}


def settled_state(pid: int, timeout: float = 5.0) -> dict:
    """``proc_state`` once every thread is asleep (S) and nothing traces it; for targets that only block.

    Comparing settled states before and after gilty ran avoids racing a thread that is between two
    blocking calls, while a target left stopped (T/t) or traced by gilty never settles and shows up.
    """
    deadline = time.monotonic() + timeout
    while True:
        state = proc_state(pid)
        if state["tracer"] == 0 and set(state["threads"].values()) == {"S"} and state["state"] == "S":
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid} did not settle (every thread asleep, untraced) in {timeout:g} s: {state}")
        time.sleep(0.02)


def task_ids(pid: int) -> set:
    return {int(t) for t in os.listdir(f"/proc/{pid}/task")}


def line_of(script: str, marker: str) -> int:
    """Line number of the ``# LINE:<marker>`` comment in a target script."""
    tag = f"# LINE:{marker}"
    for number, text in enumerate((TARGETS / script).read_text(encoding="utf-8").splitlines(), 1):
        if text.rstrip().endswith(tag):
            return number
    raise AssertionError(f"no {tag} in {script}")


def thread_named(report: dict, name: str) -> dict:
    """The one thread called ``name`` in a dump or record report."""
    found = [t for t in report["threads"] if t["name"] == name]
    assert len(found) == 1, (
        f"expected one thread named {name!r}, found {len(found)}; names: {[t['name'] for t in report['threads']]}"
    )
    return found[0]


@pytest.fixture(scope="session")
def deny_perf(tmp_path_factory) -> str:
    """A wrapper that runs its command under a seccomp filter making perf_event_open fail with EACCES
    (tests/targets/deny_perf/deny_perf.c): gilty then meets a host that forbids perf events."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (apt-get install gcc; see the Makefile's system-deps)")
    out = tmp_path_factory.mktemp("deny_perf") / "deny_perf"
    source = TARGETS / "deny_perf" / "deny_perf.c"
    done = subprocess.run([gcc, "-O1", "-o", str(out), str(source)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return str(out)
