"""Who held the GIL while a thread waited for it, from the same sampling pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gilty.sampling.analysis.functions import most_frequent
from gilty.sampling.native_frames import frame_text
from gilty.sampling.session import Session

NO_HOLDER_NAME = "(no holder seen)"
BLAME_ENTRIES_PER_THREAD = 10


@dataclass
class BlameShare:
    """Share of one thread's waiting_gil samples during which ``holder`` held the GIL in ``function``.

    ``holder_tid`` is None for passes where no thread was seen holding the GIL: the GIL was
    being handed over (dropped, not yet taken) when the sample was read.
    """

    holder_tid: Optional[int]
    holder_name: str
    holder_function: Optional[str]
    holder_file: Optional[str]
    holder_line: Optional[int]
    samples: int
    fraction: float

    def function_label(self) -> str:
        if self.holder_tid is None:
            return ""
        if self.holder_function is None:
            return "(no Python stack)"
        return frame_text(self.holder_function, self.holder_file, self.holder_line)


def blame_counts(session: Session) -> dict:
    """{waiter tid: {(holder tid or None, function, file): [samples, {line: samples}]}}, untruncated.

    ``function`` and ``file`` are None when there was no holder or it had no Python stack. The
    holder of each waiting_gil sample was found in the same pass by the sampler (``Session.blame``).
    """
    pooled: dict = {}
    for (tid, holder, stack_id), n in session.blame.items():
        frame = session.innermost_frame(stack_id) if holder is not None else None
        function, file, line = frame if frame is not None else (None, None, None)
        entry = pooled.setdefault(tid, {}).setdefault((holder, function, file), [0, {}])
        entry[0] += n
        lines = entry[1]
        lines[line] = lines.get(line, 0) + n
    return pooled


def blame(session: Session, limit: int = BLAME_ENTRIES_PER_THREAD, counts: dict | None = None) -> dict:
    """{tid: [BlameShare]} for every thread with waiting_gil samples, largest share first."""
    pooled = blame_counts(session) if counts is None else counts
    result = {}
    for tid, entries in pooled.items():
        waiting = sum(n for n, _lines in entries.values())
        ranked = sorted(entries.items(), key=lambda item: (-item[1][0], str(item[0])))[:limit]
        result[tid] = [
            BlameShare(
                holder_tid=holder,
                holder_name=NO_HOLDER_NAME if holder is None else session.thread_name(holder),
                holder_function=function,
                holder_file=file,
                holder_line=most_frequent(lines),
                samples=n,
                fraction=n / waiting,
            )
            for (holder, function, file), (n, lines) in ranked
        ]
    return result
