"""The error type every command raises, and gilty's exit codes.

Commands never call ``sys.exit``: they return an exit code or raise ``CommandError``;
``gilty.cli.main`` turns either into the process exit status and prints one line.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_NO_SUCH_PROCESS = 3
EXIT_NOT_PYTHON = 4
EXIT_UNSUPPORTED = 5
EXIT_PERMISSION_DENIED = 6
EXIT_TARGET_EXITED = 7
EXIT_PARTIAL = 8
EXIT_EXACT_UNAVAILABLE = 9  # --exact asked for, but the target cannot be traced (symbols, permission, kernel)
EXIT_GATE_FAILED = 10  # a --fail-if gate held: the recording is fine, the measured behaviour is not
EXIT_ALL_FAILED = 11  # `gilty load`: not one request got an answer (the report is still written)
EXIT_SERVER_NOT_READY = 12  # `gilty load -- SERVER`: the server never answered, so nothing was loaded
EXIT_INTERRUPTED = 130  # Ctrl-C outside a recording: 128 + SIGINT, as shells report it

# GiltyError.kind (set by the native module) -> exit status. Unknown kinds are internal errors.
EXIT_CODE_BY_KIND = {
    "no_such_process": EXIT_NO_SUCH_PROCESS,
    "not_python": EXIT_NOT_PYTHON,
    "not_initialised": EXIT_NOT_PYTHON,
    "unsupported_version": EXIT_UNSUPPORTED,
    "unrecognised_interpreter": EXIT_UNSUPPORTED,
    "permission_denied": EXIT_PERMISSION_DENIED,
    "target_exited": EXIT_TARGET_EXITED,
    "exact_unavailable": EXIT_EXACT_UNAVAILABLE,
    "internal": EXIT_INTERNAL,
}


def exit_code_for_kind(kind: object) -> int:
    """The exit status for a native ``GiltyError.kind``."""
    return EXIT_CODE_BY_KIND.get(str(kind), EXIT_INTERNAL)


class CommandError(Exception):
    """A failure the user should see as one line, ending gilty with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_INTERNAL) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(CommandError):
    """A bad command line (exit status 2, like argparse's own errors)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)
