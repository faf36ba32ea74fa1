"""Two recordings side by side, function by function: where the not-idle time went in A and in B.

Processes are matched by role and command, not pid (a second run has other pids): a server's
workers are one "worker" process in each run. Frames are matched by function and file, without
the line, so a line moved by an edit is still the same function.
"""

from __future__ import annotations

import math
from typing import Optional

from gilty.sampling.processes import roles
from gilty.sampling.session import IDLE, STATE_NAMES, UNKNOWN, Recording

_DIGITS = str.maketrans("0123456789", "##########")
# Counting noise is optimistic for samples that come in runs: x2, and a 10 % floor (as per-endpoint time).
COUNT_NOISE = 2.0
REL_FLOOR = 0.10
ABS_FLOOR = 0.01  # shown from 1 point of the not-idle time
# Flagged from 2 points: samples come in runs (a start-up import caught in one run and not the other).
FLAG_FLOOR = 0.02


def _base(path: str) -> str:
    return str(path).rsplit("/", 1)[-1]


def process_key(recording: Recording, session) -> str:
    """``worker · python -m gunicorn app:app``: what a process is, the same in another run."""
    role = roles(recording).get(session.target.pid, "main")
    words = (session.target.cmdline or session.target.executable or "python").split()
    command = " ".join(_base(w) if w.startswith("/") else w for w in words)[:60]
    return f"{role} · {command}"


def frame_key(frame: tuple) -> str:
    function, file, _line = frame
    return f"{function} ({_base(file)})"


def stacks(recording: Recording, idle: bool = False) -> dict:
    """{(process key, thread name with digits as #, state name, frame, ...): samples}, outermost first."""
    out: dict = {}
    for s in recording.sessions:
        process = process_key(recording, s)
        for (tid, state, stack_id), n in s.stack_counts().items():
            if state == IDLE and not idle:
                continue
            name = STATE_NAMES[state] if 0 <= state < len(STATE_NAMES) else STATE_NAMES[UNKNOWN]
            key = (process, s.thread_name(tid).translate(_DIGITS), name, *(frame_key(f) for f in reversed(s.stack(stack_id))))
            out[key] = out.get(key, 0) + n
    return out


def functions(recording: Recording) -> tuple:
    """({function key: not-idle samples with it innermost}, {function key: ... with it anywhere on
    the stack}, not-idle samples in all)."""
    own: dict = {}
    anywhere: dict = {}
    total = 0
    for key, n in stacks(recording).items():
        total += n
        frames = key[3:]  # (process, thread, state, outermost, ..., innermost)
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0) + n
        for name in set(frames):
            anywhere[name] = anywhere.get(name, 0) + n
    return own, anywhere, total


def _share_row(name: str, metric: str, ca: int, na: int, cb: int, nb: int) -> Optional[tuple]:
    pa = ca / na if na else 0.0
    pb = cb / nb if nb else 0.0
    if max(pa, pb) < ABS_FLOOR or abs(pb - pa) < ABS_FLOOR:
        return None  # too small to read, or no change worth a line
    se = math.sqrt((pa * (1 - pa) / na if na else 0.0) + (pb * (1 - pb) / nb if nb else 0.0))
    noise: Optional[float] = COUNT_NOISE * se if na and nb else None
    floor = max(FLAG_FLOOR, REL_FLOOR * max(pa, pb))
    beyond = noise is not None and abs(pb - pa) > max(noise, floor)
    return (name, metric, pa, pb, noise, beyond)


def function_changes(a: Recording, b: Recording, limit: int = 10) -> list:
    """[(function, metric, share in A, share in B, noise, beyond noise)], the functions that changed
    most first. ``self_share``: samples with the function innermost; ``total_share``: with it
    anywhere on the stack; both of each run's not-idle samples."""
    own_a, any_a, na = functions(a)
    own_b, any_b, nb = functions(b)
    by_function: dict = {}
    for metric, ca, cb in (("total_share", any_a, any_b), ("self_share", own_a, own_b)):
        for name in set(ca) | set(cb):
            found = _share_row(name, metric, ca.get(name, 0), na, cb.get(name, 0), nb)
            if found is not None:
                by_function.setdefault(name, []).append(found)
    ranked = sorted(by_function.items(), key=lambda kv: (-max(abs(r[3] - r[2]) for r in kv[1]), kv[0]))
    return [r for _name, found in ranked[:limit] for r in found]


def differential_lines(a: Recording, b: Recording) -> list:
    """Collapsed lines ``frames countA countB`` for a differential flame graph, B scaled to A's
    total so a function that kept its share keeps its width and colour."""
    sa, sb = stacks(a), stacks(b)
    ta, tb = sum(sa.values()), sum(sb.values())
    scale = ta / tb if tb else 1.0
    lines = []
    for key in sorted(set(sa) | set(sb)):
        text = ";".join(" ".join(part.replace(";", ":").splitlines()) for part in key)
        lines.append(f"{text} {sa.get(key, 0)} {round(sb.get(key, 0) * scale)}")
    return lines
