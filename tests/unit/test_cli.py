"""The CLI's contract: one `gilty: error: ...` line on stderr and the documented exit status.

The native module is replaced by a stand-in here, and only here: these tests check how the
CLI maps errors, not what the sampler does.
"""

import sys
import types

import pytest
from gilty._errors import EXIT_CODE_BY_KIND
from gilty.cli import main, parse_options
from gilty.sampling import launch

KIND_EXIT_CODES = [
    ("no_such_process", 3),
    ("not_python", 4),
    ("not_initialised", 4),
    ("unsupported_version", 5),
    ("unrecognised_interpreter", 5),
    ("permission_denied", 6),
    ("target_exited", 7),
    ("exact_unavailable", 9),
    ("internal", 1),
    ("a_kind_from_the_future", 1),
]


class StandInGiltyError(Exception):
    def __init__(self, message, kind):
        super().__init__(message)
        self.kind = kind


def install_native(monkeypatch, target_error):
    """A gilty._native whose Target(pid) raises ``target_error``."""
    module = types.ModuleType("gilty._native")
    module.GiltyError = StandInGiltyError

    class Target:
        def __init__(self, pid):
            raise target_error

    class ProcessSet:  # `top` and several pids attach through a ProcessSet: it fails the same way
        def __init__(self, pids, rate_hz, follow=False):
            raise target_error

    module.Target = Target
    module.ProcessSet = ProcessSet
    module.Sampler = None
    module.syscall_name = lambda nr: f"syscall_{nr}"
    monkeypatch.setitem(sys.modules, "gilty._native", module)
    return module


def run_cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(err):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gilty: error: ")
    assert "Traceback" not in err


def test_exit_code_table_matches_the_documented_kinds():
    assert {kind for kind, _ in KIND_EXIT_CODES[:-1]} == set(EXIT_CODE_BY_KIND)


@pytest.mark.parametrize("kind,expected", KIND_EXIT_CODES)
@pytest.mark.parametrize(
    "command", [["dump", "--pid", "4242"], ["record", "--pid", "4242", "--duration", "1"], ["top", "--pid", "4242"]]
)
def test_native_errors_map_to_exit_codes(monkeypatch, capsys, kind, expected, command):
    install_native(monkeypatch, StandInGiltyError(f"pid 4242: {kind}\n(details on a second line)", kind))
    code, out, err = run_cli(capsys, command)
    assert code == expected
    assert out == ""
    assert_one_error_line(err)
    assert f"pid 4242: {kind} (details on a second line)" in err


def test_missing_extension_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gilty._native", None)  # makes `import gilty._native` fail
    code, _, err = run_cli(capsys, ["dump", "--pid", "1"])
    assert code == 1
    assert_one_error_line(err)
    assert "native extension" in err and "make setup" in err


def test_unexpected_exception_is_one_line(monkeypatch, capsys):
    install_native(monkeypatch, ZeroDivisionError("boom"))
    code, _, err = run_cli(capsys, ["dump", "--pid", "1"])
    assert code == 1
    assert_one_error_line(err)
    assert "internal error: ZeroDivisionError: boom" in err


def test_ctrl_c_outside_a_recording(monkeypatch, capsys):
    install_native(monkeypatch, KeyboardInterrupt())
    code, _, err = run_cli(capsys, ["dump", "--pid", "1"])
    assert code == 130
    assert err == "gilty: interrupted\n"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["record"],
        ["record", "--pid", "1", "--", "python", "app.py"],
        ["record", "--pid", "0"],
        ["record", "--pid", "x"],
        ["record", "--pid", "1", "--rate", "0"],
        ["record", "--pid", "1", "--duration", "-1"],
        ["record", "--pid", "1", "--format", "pdf"],
        ["record", "--pid", "1", "-o", "out.pdf"],
        ["report"],
        ["dump", "--pid", "1", "--format", "html"],
        ["record", "--"],
        ["dump"],
        ["dump", "--pid", "1", "--", "python"],
        ["top", "--pid", "1", "--rate", "nan"],
    ],
)
def test_usage_errors_exit_2_with_one_line(capsys, argv):
    code, out, err = run_cli(capsys, argv)
    assert code == 2
    assert out == ""
    assert_one_error_line(err)


def test_version(capsys):
    code, out, _ = run_cli(capsys, ["--version"])
    assert code == 0 and out.startswith("gilty ")


def test_help_lists_commands(capsys):
    code, out, _ = run_cli(capsys, ["--help"])
    assert code == 0
    for command in ("record", "top", "dump"):
        assert command in out


def test_split_child_command():
    # the first `--` ends gilty's arguments; everything after it, a later `--` too, is the command
    attached = parse_options(["record", "--pid", "1"]).target
    assert attached.pids == (1,) and attached.command is None
    assert parse_options(["record", "--", "python", "-m", "x", "--", "y"]).target.command == ["python", "-m", "x", "--", "y"]


def test_command_that_cannot_start(monkeypatch, capsys):
    install_native(monkeypatch, StandInGiltyError("never attached", "internal"))
    code, _, err = run_cli(capsys, ["record", "--", "/nonexistent/gilty-test-binary"])
    assert code == 2
    assert_one_error_line(err)
    assert "cannot start '/nonexistent/gilty-test-binary'" in err


def test_command_without_python_times_out_and_is_stopped(monkeypatch, capsys):
    install_native(monkeypatch, StandInGiltyError("not a Python process", "not_python"))
    monkeypatch.setattr(launch, "FIND_PYTHON_TIMEOUT_S", 0.3)
    started = []
    real_start = launch.start_command
    monkeypatch.setattr(launch, "start_command", lambda argv, **kw: started.append(real_start(argv, **kw)) or started[-1])
    code, _, err = run_cli(capsys, ["record", "--", "sleep", "30"])
    assert code == 4
    assert_one_error_line(err)
    assert "no Python interpreter found in 'sleep'" in err
    assert started[0].returncode is not None  # stopped and reaped


def test_command_that_exits_before_attach(monkeypatch, capsys):
    install_native(monkeypatch, StandInGiltyError("not a Python process", "not_python"))
    code, _, err = run_cli(capsys, ["record", "--", "true"])
    assert code == 7
    assert_one_error_line(err)
    assert "'true' exited (status 0) before a Python interpreter could be attached" in err


def test_ctrl_c_while_waiting_for_the_interpreter_stops_the_command(monkeypatch):
    native = install_native(monkeypatch, StandInGiltyError("not a Python process", "not_python"))

    class Requested:
        requested = True

    child = launch.start_command(["sleep", "30"])
    try:
        with pytest.raises(launch.CommandError) as raised:
            launch.attach_to_command(native, child, ["sleep", "30"], timeout_s=5.0, stop=Requested())
        assert raised.value.exit_code == 130
    finally:
        launch.terminate(child)
    assert child.returncode is not None
