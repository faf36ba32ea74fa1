"""What every picture of stacks draws: idle left out unless asked, identical workers merged.

The flame graphs (SVG, HTML), speedscope and collapsed stacks show where time went. A server's
master and its workers' thread pools sleep most of the time; drawn, their idle samples are most
of the picture. So idle is off by default (``--idle`` brings it back, as py-spy's does), and
the forked workers of one master, which run the same code, are one process with their threads
merged by name (``--merge-workers``, on by default when the recording has workers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from gilty.report.labels import command_text, frame_label, process_label, thread_label_in_session
from gilty.sampling.analysis.pools import pool_key
from gilty.sampling.native_frames import frame_text, is_native
from gilty.sampling.processes import roles
from gilty.sampling.session import IDLE, Recording, Session


@dataclass
class PictureOptions:
    """``idle``: draw idle samples. ``merge_workers``: one process for a master's identical
    workers; None merges when the recording holds workers (a server)."""

    idle: bool = False
    merge_workers: Optional[bool] = None
    # False: frames without their line (``function (file.py)``), so a function's lines are one frame.
    lines: bool = True
    # The HTML report's source view: how many hot functions it shows (docs/source-view.md).
    source_functions: int = 15


DEFAULT = PictureOptions()
_PYTHON = re.compile(r"^python[0-9.]*$")


def short_command(cmdline: str) -> str:
    """A command line that fits a column: absolute paths as base names, the interpreter as `python`.

    ``/srv/venv/bin/python /srv/venv/bin/gunicorn app:app -w 4`` reads ``python gunicorn app:app -w 4``:
    what tells processes apart is the script and its arguments, not the virtualenv's path.
    """
    words = cmdline.split()
    out = []
    for i, word in enumerate(words):
        if word.startswith("/") and len(word) > 1:
            word = word.rstrip("/").rsplit("/", 1)[-1] or word
        if i == 0 and _PYTHON.match(word):
            word = "python"
        out.append(word)
    return " ".join(out)


@dataclass
class Group:
    """One process as a picture shows it: a session, or several identical workers merged."""

    label: str
    role: str
    sessions: list

    @property
    def merged(self) -> bool:
        return len(self.sessions) > 1


def merges(recording: Recording, options: Optional[PictureOptions]) -> bool:
    options = options or DEFAULT
    if options.merge_workers is not None:
        return options.merge_workers
    return "worker" in roles(recording).values()


def groups(recording: Recording, options: Optional[PictureOptions] = None) -> list:
    """The recording's processes as the picture draws them, in first-seen order."""
    role_of = roles(recording)
    if not merges(recording, options):
        return [Group(process_label(s), role_of.get(s.target.pid, ""), [s]) for s in recording.sessions]
    out: list = []
    by_key: dict = {}
    for s in recording.sessions:
        role = role_of.get(s.target.pid, "")
        if role != "worker":
            out.append(Group(process_label(s), role, [s]))
            continue
        key = (s.target.ppid, s.target.cmdline)
        group = by_key.get(key)
        if group is None:
            group = by_key[key] = Group("", role, [])
            out.append(group)
        group.sessions.append(s)
    for group in by_key.values():
        if len(group.sessions) == 1:
            group.label = process_label(group.sessions[0])
        else:
            first = group.sessions[0]
            group.label = f"{len(group.sessions)} workers of pid {first.target.ppid} · {short_command(command_text(first))}"
    return out


def thread_name(group: Group, session: Session, tid: int) -> str:
    """``MainThread (tid 4243)``; in merged workers the name alone, numbered pools as one."""
    label = thread_label_in_session(session, tid)
    if not group.merged:
        return label
    suffix = f" (tid {tid})"
    return pool_key(label[: -len(suffix)] if label.endswith(suffix) else label)


def drawn(state: int, options: Optional[PictureOptions]) -> bool:
    return (options or DEFAULT).idle or state != IDLE


def stack_rows(recording: Recording, options: Optional[PictureOptions] = None) -> list:
    """[(group, thread name, state, session, stack_id, samples)] of every drawn sample, with the
    thread name as the picture shows it (merged workers: one name for the same thread of each)."""
    rows = []
    for group in groups(recording, options):
        for s in group.sessions:
            names: dict = {}
            for (tid, state, stack_id), n in s.stack_counts().items():
                if not drawn(state, options):
                    continue
                name = names.get(tid)
                if name is None:
                    name = names[tid] = thread_name(group, s, tid)
                rows.append((group, name, state, s, stack_id, n))
    return rows


def short_file(path: str) -> str:
    return str(path).rsplit("/", 1)[-1]


class FrameNames:
    """``function (file.py:line)`` for pictures, the file by its base name; two files of the same
    base name (two packages' ``__init__.py``) keep as many directories as tell them apart."""

    def __init__(self, frames, lines: bool = True) -> None:
        self.lines = lines
        by_base: dict = {}
        for function, file, line in frames:
            if is_native(line):
                continue  # named by frame_text's own short form
            by_base.setdefault((function, short_file(file)), set()).add(str(file))
        self._file: dict = {}  # (function, file) -> the file as shown
        for (function, _base), files in by_base.items():
            depth = 1
            while len({"/".join(f.split("/")[-depth:]) for f in files}) < len(files) and depth < 64:
                depth += 1
            for f in files:
                self._file[(function, f)] = "/".join(f.split("/")[-depth:])

    def short(self, frame: tuple) -> str:
        function, file, line = frame
        if is_native(line):
            return self._text(frame_text(function, file, line, short=True))
        return self._label((function, self._file.get((function, str(file)), short_file(file)), line))

    def full(self, frame: tuple) -> str:
        return self._label(tuple(frame))

    def _label(self, frame: tuple) -> str:
        # labels.frame_label makes the name safe to show.
        return self._text(frame_label(frame))

    def _text(self, text: str) -> str:
        # Without lines the ":line" is taken off.
        if not self.lines and text.endswith(")") and ":" in text:
            text = text[: text.rindex(":")] + ")"
        return text


def frame_names(recording: Recording, options: Optional[PictureOptions] = None) -> FrameNames:
    return FrameNames({f for s in recording.sessions for f in s.frames.values()}, (options or DEFAULT).lines)


# Hue and saturation per state name; a state this list does not know gets a hue from its name.
STATE_COLOURS = {
    "holding_gil": (6, 70),
    "gc": (280, 45),
    "waiting_gil": (36, 85),
    "native": (210, 60),
    "idle": (210, 8),
    "unknown": (190, 5),
    "cpu_wait": (150, 45),  # green, as in the HTML report: runnable, no CPU
}


def _hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    return h


def state_colour(state: str, name: str = "") -> str:
    """``rgb(r,g,b)``: the state's hue, a stable shade per frame name so neighbours differ."""
    import colorsys

    hue, sat = STATE_COLOURS.get(state) or (_hash(state) % 360, 50)
    h = _hash(name)
    light = (62 + (h >> 5) % 22) if name else 55
    r, g, b = colorsys.hls_to_rgb(((hue + (h % 20) - 10) % 360) / 360, light / 100, sat / 100)
    return f"rgb({round(r * 255)},{round(g * 255)},{round(b * 255)})"
