"""Thread pools: threads whose names differ only in their numbers ("AnyIO worker thread" ×8,
"ThreadPoolExecutor-0_0" .. "_7") shown as one line, with their shares averaged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NUMBER = re.compile(r"\d+")
# Differently numbered threads make a pool from this many on ("io1", "io2" stay two lines);
# identically named ones from two on.
MIN_NUMBERED_POOL = 3


def pool_key(name: str) -> str:
    """The name with every run of digits replaced by ``#``: equal keys are one pool."""
    return _NUMBER.sub("#", name)


def pool_label(key: str, names: list) -> str:
    """ "ThreadPoolExecutor-0_#" for a pool whose names vary in one place only where they do."""
    if len(set(names)) == 1:
        return names[0]
    # Keep the digits that all members share ("-0_"), show only the varying ones as "#".
    parts = [_NUMBER.findall(n) for n in names]
    pieces = _NUMBER.split(names[0])
    out = pieces[0]
    for i, piece in enumerate(pieces[1:]):
        values = {p[i] for p in parts if i < len(p)}
        out += (values.pop() if len(values) == 1 else "#") + piece
    return out


@dataclass
class Pool:
    """One line of a thread table: a single thread (``size`` 1) or a pool of same-named threads."""

    label: str
    tids: list
    samples: int  # summed over the pool's threads
    fractions: list  # per state code: samples in that state / samples (= mean over threads, sample-weighted)
    members: list = field(default_factory=list)  # the items grouped, in input order

    @property
    def size(self) -> int:
        return len(self.tids)

    @property
    def name(self) -> str:
        return self.label if self.size == 1 else f"{self.label} ×{self.size}"


def group_pools(threads: list, name_of, tid_of, counts_of) -> list:
    """Group ``threads`` (any objects) into Pools, keeping first-seen order.

    ``counts_of(t)`` gives per-state sample counts; a pool's fractions are its summed counts over
    its summed samples, i.e. the average over its threads weighted by samples.
    """
    by_key: dict = {}
    for t in threads:
        by_key.setdefault(pool_key(name_of(t)), []).append(t)
    for key in list(by_key):
        members = by_key[key]
        if len({name_of(t) for t in members}) > 1 and len(members) < MIN_NUMBERED_POOL:
            del by_key[key]
            for t in members:  # unique names: a key of their own each
                by_key.setdefault("\0" + name_of(t) + "\0" + str(tid_of(t)), []).append(t)
    pools = []
    for key, members in by_key.items():
        counts = [sum(c) for c in zip(*(counts_of(t) for t in members))]
        samples = sum(counts)
        names = [name_of(t) for t in members]
        label = names[0] if len(members) == 1 else pool_label(key, names)
        pools.append(
            Pool(
                label=label,
                tids=[tid_of(t) for t in members],
                samples=samples,
                fractions=[c / samples if samples else 0.0 for c in counts],
                members=members,
            )
        )
    return pools
