"""Starting `-- CMD` and finding the Python process inside it, and stopping what we started.
Attaching to a pid is gilty.sampling.attach (imported here too, for the callers that start or attach)."""

from __future__ import annotations

import os
import signal
import time
from types import ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    import subprocess
    from typing import Any, Optional

from gilty._errors import EXIT_INTERRUPTED, EXIT_NOT_PYTHON, EXIT_TARGET_EXITED, EXIT_USAGE, CommandError
from gilty.sampling.attach import attach, child_pids, native_module  # noqa: F401 - used through this module too

# A freshly started interpreter is "not Python" to the sampler until libpython is mapped and
# _PyRuntime initialised; a launcher (shell wrapper, pyenv shim, uv run) may exec or fork it.
FIND_PYTHON_TIMEOUT_S = 5.0
FIND_PYTHON_POLL_S = 0.05
# SIGINT first so the target can run its own shutdown, then harder.
TERMINATE_STEPS = ((signal.SIGINT, 2.0), (signal.SIGTERM, 2.0), (signal.SIGKILL, None))


# The guard of a command that must not outlive gilty: it waits for its stdin (a pipe only gilty
# holds) to end, which happens when gilty exits however it exits, SIGKILL included, then stops
# the command's process group as ``terminate`` would. Ctrl-C in the terminal is gilty's to handle.
_GUARD = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
group = int(sys.argv[1])
sys.stdin.buffer.read()
for sig, wait_s in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 0.0)):
    try:
        os.killpg(group, sig)
    except OSError:
        break
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except OSError:
            sys.exit(0)
        time.sleep(0.02)
"""


def start_command(argv: list, die_with_gilty: bool = False) -> subprocess.Popen:
    """Start CMD with its stdout and stderr on gilty's stderr, so a JSON report on stdout stays clean.

    It gets its own session (and process group) so that stopping it reaches a whole wrapper
    chain (``sh -c 'python app.py'``) and a Ctrl-C meant for gilty is forwarded, not raced.
    With ``die_with_gilty`` (a server `gilty load` started) a guard process stops the group
    when gilty ends, even by SIGKILL: a process group has no parent-death signal of its own.
    """
    import subprocess  # here: only commands that start a child need it (`gilty dump` starts quicker)
    import sys

    try:
        child = subprocess.Popen(argv, stdout=2, stderr=2, start_new_session=True)
    except OSError as e:
        raise CommandError(f"cannot start {argv[0]!r}: {e.strerror or e}", EXIT_USAGE) from None
    child.guard = None
    if die_with_gilty:
        # The guard's own session: a Ctrl-C or a kill of gilty's process group does not reach it
        # before it has done its job.
        child.guard = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _GUARD, str(child.pid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    return child


def attach_to_command(
    native: ModuleType, child: subprocess.Popen, argv: list, timeout_s: Optional[float] = None, stop: Any = None
) -> Any:
    """Attach to the Python process CMD became: CMD's own pid, else its nearest Python descendant.

    Retries while candidates are "not_python" (interpreter not loaded yet) for ``timeout_s``, and
    for as long as one is "not_initialised" (its interpreter is loaded and starting: it will be
    Python, or exit); any other error is final. ``stop`` (a ``capture.Stop``) ends the wait on
    Ctrl-C/SIGTERM.
    """
    if timeout_s is None:
        timeout_s = FIND_PYTHON_TIMEOUT_S
    deadline = time.monotonic() + timeout_s
    while True:
        initialising = False
        for pid in [child.pid, *child_pids(child.pid)]:
            try:
                return native.Target(pid)
            except native.GiltyError as e:
                kind = getattr(e, "kind", None)
                initialising = initialising or kind == "not_initialised"
                # A candidate that vanished between listing and attaching is not an error.
                if kind in ("not_python", "not_initialised", "no_such_process"):
                    continue
                raise
        if stop is not None and stop.requested:
            raise CommandError(f"interrupted while waiting for a Python interpreter in {argv[0]!r}", EXIT_INTERRUPTED)
        code = child.poll()
        if code is not None:
            raise CommandError(
                f"{argv[0]!r} exited (status {code}) before a Python interpreter could be attached",
                EXIT_TARGET_EXITED,
            )
        if time.monotonic() >= deadline and not initialising:
            raise CommandError(
                f"no Python interpreter found in {argv[0]!r} (pid {child.pid}) or its children after {timeout_s:g} s",
                EXIT_NOT_PYTHON,
            )
        time.sleep(FIND_PYTHON_POLL_S)


def group_members(pgid: int) -> list:
    """Live (non-zombie) processes in process group ``pgid``, read from /proc."""
    members: list = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # Fields after the command name: state, ppid, pgrp, ...
        if len(fields) >= 3 and fields[0] != b"Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def terminate(child: subprocess.Popen, steps: Optional[tuple] = None) -> Optional[int]:
    """Stop what we started: SIGINT, SIGTERM after 2 s, SIGKILL after 2 more.

    Signals go to the child's whole process group (it leads one, see ``start_command``), and
    escalation goes on while any of the group lives: a shell wrapper may exit on SIGINT and
    leave behind a background job that ignores it. Always reaps the child; returns its status.
    """

    def done() -> bool:
        return child.poll() is not None and not group_members(child.pid)

    for sig, wait_s in steps or TERMINATE_STEPS:
        if done():
            break
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # a member changed credentials (setuid): signal the child alone
            if child.poll() is None:
                child.send_signal(sig)
        if wait_s is None:
            break
        deadline = time.monotonic() + wait_s
        while not done() and time.monotonic() < deadline:
            time.sleep(0.02)
    status = child.wait()
    guard = getattr(child, "guard", None)
    if guard is not None:
        guard.stdin.close()  # the group is gone: the guard finds nothing to stop and exits
        guard.wait()
    return status
