"""Collapsed stacks (``.collapsed`` / ``.folded``): ``process;thread;state;frame;... count``.

One line per distinct (process, thread, state, stack), outermost frame first, the count being
samples: the input flamegraph.pl, inferno and speedscope all read. The thread state sits under
the thread so a flame graph splits each thread's time by state.
"""

from __future__ import annotations

from gilty.report.labels import process_label, stack_labels, state_name, thread_label
from gilty.sampling.session import Recording, Session


def clean(label: str) -> str:
    """A label safe inside one collapsed line.

    ``;`` separates frames and a newline ends the line, so neither may appear in a name:
    ``;`` becomes ``:`` and any line break a space (a Python identifier never holds either,
    but file names and thread names can).
    """
    return " ".join(label.replace(";", ":").splitlines())


def session_lines(session: Session) -> list:
    """The collapsed lines of one process, sorted (same recording, same text)."""
    process = clean(process_label(session))
    threads = {tid: clean(thread_label(session, tid)) for tid in session.tids()}
    counts: dict = {}
    for (tid, state, stack_id), n in session.stack_counts().items():
        frames = [clean(label) for label in reversed(stack_labels(session, stack_id))]
        key = ";".join([process, threads.get(tid) or clean(thread_label(session, tid)), state_name(state), *frames])
        # Distinct stacks can share a label (same function, file and line): their counts add up.
        counts[key] = counts.get(key, 0) + n
    return [f"{key} {n}" for key, n in sorted(counts.items())]


def lines(recording: Recording) -> list:
    return [line for session in recording.sessions for line in session_lines(session)]


def render(recording: Recording) -> str:
    out = lines(recording)
    return "\n".join(out) + "\n" if out else ""
