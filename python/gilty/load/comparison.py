"""What `gilty compare` hands to the report layer: two runs' differences (``run_diff.Row``), and for
two recordings the recordings themselves (the differential flame graph draws them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class Comparison:
    label_a: str  # how the runs are named in the output (their file names)
    label_b: str
    compared: str  # "load" or "recording"
    rows: list
    a: Optional[object] = None  # the Recordings, when ``compared`` is "recording"
    b: Optional[object] = None
