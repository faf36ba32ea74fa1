"""Collapsed stacks (``.collapsed`` / ``.folded``): ``process;thread;state;frame;... count``.

One line per distinct (process, thread, state, stack), outermost frame first, the count being
samples; a recording made with ``--tasks`` adds the task view's stacks under ``asyncio tasks``
(``report/task_view.py``): the input flamegraph.pl, inferno and speedscope all read. The thread state sits under
the thread so a flame graph splits each thread's time by state. Idle samples are left out and a
server's workers merged unless asked otherwise (``report/pictures.py``).
"""

from __future__ import annotations

from typing import Callable, Optional

from gilty.report.labels import frame_label, process_label, state_name
from gilty.report.pictures import PictureOptions, stack_rows
from gilty.report.recording import tasks as task_view
from gilty.sampling.native_frames import is_native, native_parts
from gilty.sampling.session import Recording


def clean(label: str) -> str:
    """A label safe inside one collapsed line.

    ``;`` separates frames and a newline ends the line, so neither may appear in a name:
    ``;`` becomes ``:`` and any line break a space (a Python identifier never holds either,
    but file names and thread names can).
    """
    return " ".join(label.replace(";", ":").splitlines())


def counts(
    recording: Recording,
    options: Optional[PictureOptions] = None,
    name: Callable[[tuple], str] = frame_label,
) -> dict:
    """{collapsed stack: samples}; ``name`` names a frame (the whole path by default)."""
    out: dict = {}
    for group, thread, state, session, stack_id, n in stack_rows(recording, options):
        frames = [clean(name(f)) for f in reversed(session.stack(stack_id))]
        key = ";".join([clean(group.label), clean(thread), state_name(state), *frames])
        # Distinct stacks can share a label (same function, file and line): their counts add up.
        out[key] = out.get(key, 0) + n
    # The task view (`record --tasks`), beside the threads: process;asyncio tasks;task ...;leaf.
    for session, labels, n in task_view.rows(recording, name):
        key = ";".join([clean(process_label(session)), task_view.TASKS_LABEL, *(clean(x) for x in labels)])
        out[key] = out.get(key, 0) + n
    return out


def lines(recording: Recording, options: Optional[PictureOptions] = None, name: Callable[[tuple], str] = frame_label) -> list:
    """The collapsed lines, sorted (same recording, same text)."""
    return [f"{key} {n}" for key, n in sorted(counts(recording, options, name).items())]


def _whole_path(frame: tuple) -> str:
    function, file, line = frame
    if is_native(line):
        # A C frame: its source file without the line where it has one, else as with lines.
        _, source, _ = native_parts(file)
        return f"{function} ({source if source is not None else file})"
    return f"{function} ({file})" if file else str(function)


def render(recording: Recording, options: Optional[PictureOptions] = None) -> str:
    out = lines(recording, options, frame_label if options is None or options.lines else _whole_path)
    return "\n".join(out) + "\n" if out else ""
