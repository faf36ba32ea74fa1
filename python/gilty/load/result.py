"""What `gilty load` hands to the report layer (``gilty.report.write``): a run of gilty's own
open-loop steps (``LoadRun``) or of Locust's closed loop (``LocustResult``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class LoadRun:
    """The steps of an open-loop run and what was read from them.

    ``steps`` are the generator's per-step dicts and ``verdicts`` their ``analysis.StepVerdict`` (one
    each); ``profiles`` one ``profile.StepProfile`` or None per step; ``step_recording`` is
    ``(rate, Recording)`` of the last profiled step, which the HTML page draws (None without a profile,
    and for a run read back from its JSON)."""

    urls: list  # (url, weight)
    arrivals: str
    slo: Optional[tuple]  # (percentile, limit_s)
    steps: list
    verdicts: list
    stopped: bool = False
    knee: Optional[object] = None  # analysis.Knee
    profiles: list = field(default_factory=list)
    workers_ready: Optional[dict] = None  # asdict(ready.Readiness)
    step_recording: Optional[tuple] = None


@dataclass
class LocustResult:
    """A Locust run: ``figures`` as its JSON report holds them (options, ``stopped``, Locust's
    requests and seconds, ``profile`` as a dict), ``profile`` the server's ``StepProfile`` during the
    run and ``recording`` its Recording (both None when no server was profiled)."""

    figures: dict
    profile: Optional[object] = None
    recording: Optional[object] = None
