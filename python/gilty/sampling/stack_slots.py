"""Stacks over time: sample counts per (thread, state, stack) in each stretch of a recording.

A run keeps the stack of its first pass only (runs are cut where the state or syscall changes,
not where the stack does: a busy thread's stack changes nearly every pass), so runs cannot say
which functions a thread ran when. The sampler's batches can: each brings its counts per
(tid, state, stack) for its ~0.1-0.25 s. ``StackSlots`` keeps them per slot of whole batches, in
time order. Memory stays bounded: past ``MAX_SLOTS`` slots, neighbouring slots are merged in
pairs and each later slot takes twice as many batches, so an hour has ~1000 slots of a few seconds.
Within a slot, keys are in the order first seen, so what a thread did first comes first.
"""

from __future__ import annotations

from array import array
from typing import Iterable, Optional

MAX_SLOTS = 1024


class StackSlots:
    """``first[k]``: the first pass of slot k (its end is the next slot's first pass, or the last
    pass); ``counts[k]``: {(tid, state, stack_id): samples} of the slot, in first-seen order."""

    __slots__ = ("first", "counts", "width", "_batches", "_keys")

    def __init__(self) -> None:
        self.first = array("I")
        self.counts: list = []
        self.width = 1  # batches a slot takes
        self._batches = 0  # batches in the last slot
        # One key tuple for all the slots that count it: a thousand slots of a long recording
        # then hold a dict entry per key, not a tuple and its numbers each (~130 -> ~40 bytes).
        self._keys: dict = {}

    def __len__(self) -> int:
        return len(self.first)

    def add(self, first_pass: int, entries: Iterable) -> None:
        """One batch starting at ``first_pass``: its (tid, state, stack_id, samples) entries.

        A batch whose first pass is that of the last slot (a batch between two kept passes of a
        coarsened timeline) joins the last slot."""
        if not self.counts or (self._batches >= self.width and first_pass > self.first[-1]):
            if len(self.first) >= MAX_SLOTS:
                self._halve()
            self.first.append(first_pass)
            self.counts.append({})
            self._batches = 0
        slot = self.counts[-1]
        keys = self._keys
        for tid, state, stack_id, n in entries:
            key = (tid, state, stack_id)
            key = keys.setdefault(key, key)
            slot[key] = slot.get(key, 0) + n
        self._batches += 1

    def _halve(self) -> None:
        merged = []
        for a, b in zip(self.counts[0::2], self.counts[1::2] + [{}]):
            for key, n in b.items():
                a[key] = a.get(key, 0) + n
            merged.append(a)
        self.first = array("I", self.first[0::2])
        self.counts = merged
        self.width *= 2
        self._batches = self.width  # every slot is full: the next batch opens a new one

    def coarsen(self, passes: int) -> None:
        """The timeline kept every other pass (``timeline.py``): slots start at the next kept pass,
        and slots that then start at the same one merge. ``passes``: the passes now kept."""
        first, counts = array("I"), []
        for f, slot in zip(self.first, self.counts):
            f = min((f + 1) // 2, max(passes - 1, 0))
            if first and f <= first[-1]:
                merged = counts[-1]
                for key, n in slot.items():
                    merged[key] = merged.get(key, 0) + n
            else:
                first.append(f)
                counts.append(slot)
        self.first, self.counts = first, counts

    # -- save / load ------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "width": self.width,
            "first": self.first.tolist(),
            # One flat list a slot: tid, state, stack_id, samples, tid, ...
            "counts": [[v for key, n in slot.items() for v in (*key, n)] for slot in self.counts],
        }

    @classmethod
    def from_dict(cls, data, passes: int, stacks: dict, no_stack: int, states: int) -> "StackSlots":
        """A saved form back, or ValueError (one line) if no recorder could have written it."""
        try:
            slots = cls()
            slots.width = int(data["width"])
            slots.first = array("I", data["first"])
            for flat in data["counts"]:
                if len(flat) % 4:
                    raise ValueError("stack_slots: a slot's counts are not (tid, state, stack, samples) fours")
                slot = {}
                for i in range(0, len(flat), 4):
                    tid, state, stack_id, n = flat[i : i + 4]
                    if not all(type(v) is int for v in (tid, state, stack_id, n)) or tid < 0 or n < 0 or not 0 <= state < states:
                        raise ValueError("stack_slots: a count is not (tid, state, stack, samples) of whole numbers")
                    if stack_id != no_stack and stack_id not in stacks:
                        raise ValueError("stack_slots name a stack that is not in the recording")
                    slot[(tid, state, stack_id)] = n
                slots.counts.append(slot)
        except (KeyError, TypeError, OverflowError, AttributeError):
            raise ValueError("stack_slots is not {width, first, counts}") from None
        if len(slots.first) != len(slots.counts) or any(a >= b for a, b in zip(slots.first, slots.first[1:])):
            raise ValueError("stack_slots: slots are not in pass order")
        if slots.first and slots.first[-1] >= max(passes, 1):
            raise ValueError("stack_slots: a slot starts after the last pass")
        slots._batches = slots.width
        return slots


def slot_spans(session, slots: Optional[StackSlots] = None) -> list:
    """[(start_s, end_s)] of each slot of ``session`` (seconds on the recording's time axis)."""
    slots = session.stack_slots if slots is None else slots
    times = session.times
    if slots is None or not times:
        return []
    out = []
    n = len(times)
    for k, first in enumerate(slots.first):
        start = times[min(first, n - 1)]
        nxt = slots.first[k + 1] if k + 1 < len(slots.first) else n
        end = times[nxt] if nxt < n else times[-1] + session.period_s
        out.append((start, end))
    return out
