"""Names of processes, threads and frames, shared by the formats that draw stacks.

Every stack format names things the same way, so a frame found in the flame graph can be
searched for in the trace or the collapsed file.

The target chooses its function, file, thread and module names and its command line: any of them
may hold ESC, BEL, newlines, right-to-left overrides or 10 kB of text. ``visible`` (gilty._visible)
is the one place such a name is made safe to show; ``displayed`` applies it to every name of a recording
before a format other than JSON (which escapes every such character itself) draws it.
"""

from __future__ import annotations

import os

from gilty._visible import terminal_text, visible  # noqa: F401 - the escaper, shared with every room
from gilty.sampling.native_frames import frame_text
from gilty.sampling.thread_states import STATE_NAMES, UNKNOWN

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: `gilty dump` uses `visible` without the session module
    from gilty.sampling.session import Recording, Session

# Long command lines make unreadable root frames and track names; the JSON report keeps them whole.
MAX_COMMAND_CHARS = 60


def _frame(frame: tuple) -> tuple:
    function, file, line = frame
    return (visible(function), visible(file), line)


def displayed_session(session: Session) -> Session:
    """A view of ``session`` (sharing its samples) whose names are all ``visible``."""
    # Imported here: dataclasses pulls in inspect, about half of `gilty dump`'s start-up, which
    # needs only `visible`.
    import copy
    import dataclasses

    view = copy.copy(session)
    view.frames = {k: _frame(f) for k, f in session.frames.items()}
    view.thread_names = {tid: visible(name) for tid, name in session.thread_names.items()}
    target = session.target
    view.target = dataclasses.replace(target, cmdline=visible(target.cmdline, 0), executable=visible(target.executable, 0))
    if session.command:
        view.command = [visible(word, 0) for word in session.command]
    if session.sources:
        # Keyed as the frames' files now are; a line's tabs are spaces, not a written-out "\t".
        view.sources = {
            visible(file): {
                "lines": {n: visible(text.expandtabs(8), 0) for n, text in entry["lines"].items()},
                "not_shown": visible(entry["not_shown"], 0),
            }
            for file, entry in session.sources.items()
        }
    return view


def displayed(recording: Recording) -> Recording:
    """A view of ``recording`` whose every process, thread, function and file name is ``visible``."""
    import copy

    view = copy.copy(recording)
    view.sessions = [displayed_session(s) for s in recording.sessions]
    if recording.command:
        view.command = [visible(word, 0) for word in recording.command]
    return view


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


def thread_label_in_session(session: Session, tid: int) -> str:
    """``MainThread (tid 4243)``."""
    return f"{session.thread_name(tid)} (tid {tid})"


def frame_label(frame: tuple) -> str:
    """``function (file:line)``, the py-spy / flamegraph.pl habit; a C frame of ``record --native``
    ``function (source.c:line)`` where its library has line tables, else ``function (library+0xOFFSET)``,
    as `gilty dump --native` shows it (``native_frames``)."""
    return frame_text(*frame)


def stack_labels(session: Session, stack_id: int) -> list:
    """Frame labels of a stack, innermost first ([] without a Python stack)."""
    return [frame_label(f) for f in session.stack(stack_id)]


# A thread name cut to fit a column keeps this much of its end: pools and workers are told apart by
# their numbers, which come last ("ThreadPoolExecutor-0_7", "uWSGIWorker1Core3").
NAME_TAIL = 6


def cut_name(name: str, width: int, tail: int = NAME_TAIL) -> str:
    """``name`` in ``width`` characters: its start and its last ``tail``, joined by ``~``."""
    if len(name) <= width:
        return name
    tail = max(0, min(tail, width - 2))
    return name[: width - 1 - tail] + "~" + (name[-tail:] if tail else "")


def cut_names(names: list, width: int) -> list:
    """Each name cut to ``width`` (``cut_name``), keeping more of the end of those that would read
    alike, until different names read differently: never eight rows of the same stem."""
    tails = {n: NAME_TAIL for n in names}
    while True:
        by_cut: dict = {}
        for n in tails:
            by_cut.setdefault(cut_name(n, width, tails[n]), []).append(n)
        alike = [n for group in by_cut.values() if len(group) > 1 for n in group if tails[n] < width - 2]
        if not alike:
            return [cut_name(n, width, tails[n]) for n in names]
        for n in alike:
            tails[n] += 1
