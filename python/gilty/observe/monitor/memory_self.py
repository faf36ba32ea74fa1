"""This process's shared and private memory, from /proc/self/smaps_rollup (one read, no walk)."""

from __future__ import annotations

from typing import Optional

FIELDS = ("Rss", "Pss", "Shared_Clean", "Shared_Dirty", "Private_Clean", "Private_Dirty")


def memory_self(path: str = "/proc/self/smaps_rollup") -> Optional[dict]:
    """{"rss", "pss", "shared", "private"} in bytes, or None where smaps_rollup is missing."""
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except OSError:
        return None
    kib: dict = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in FIELDS:
            kib[key] = int(rest.split()[0])
    return {
        "rss": kib.get("Rss", 0) * 1024,
        "pss": kib.get("Pss", 0) * 1024,
        "shared": (kib.get("Shared_Clean", 0) + kib.get("Shared_Dirty", 0)) * 1024,
        "private": (kib.get("Private_Clean", 0) + kib.get("Private_Dirty", 0)) * 1024,
    }
