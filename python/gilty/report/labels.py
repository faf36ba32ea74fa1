"""Names of processes, threads and frames, shared by the formats that draw stacks.

Every stack format names things the same way, so a frame found in the flame graph can be
searched for in the trace or the collapsed file.
"""

from __future__ import annotations

import os

from gilty.sampling.session import STATE_NAMES, UNKNOWN, Session

# Long command lines make unreadable root frames and track names; the JSON report keeps them whole.
MAX_COMMAND_CHARS = 60


def state_name(state: int) -> str:
    # A code this version does not know is shown as unknown rather than dropped.
    return STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else STATE_NAMES[UNKNOWN]


def command_text(session: Session) -> str:
    """The target's command line as far as it is known: cmdline, the `-- CMD`, else the executable."""
    target = session.target
    if target.cmdline:
        text = target.cmdline
    elif session.command:
        text = " ".join(session.command)
    else:
        text = os.path.basename(target.executable or "") or "python"
    text = " ".join(text.split())
    if len(text) > MAX_COMMAND_CHARS:
        text = text[: MAX_COMMAND_CHARS - 1] + "…"
    return text


def process_label(session: Session) -> str:
    """``pid 4242 · python app.py``."""
    return f"pid {session.target.pid} · {command_text(session)}"


def thread_label(session: Session, tid: int) -> str:
    """``MainThread (tid 4243)``."""
    return f"{session.thread_name(tid)} (tid {tid})"


def frame_label(frame: tuple) -> str:
    """``function (file:line)``, the py-spy / flamegraph.pl habit."""
    function, file, line = frame
    return f"{function} ({file}:{line})"


def stack_labels(session: Session, stack_id: int) -> list:
    """Frame labels of a stack, innermost first ([] without a Python stack)."""
    return [frame_label(f) for f in session.stack(stack_id)]
