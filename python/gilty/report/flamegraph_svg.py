"""An SVG flame graph, drawn by inferno (the native module) from the collapsed lines."""

from __future__ import annotations

from gilty.sampling import launch
from gilty.report import collapsed
from gilty.report.labels import process_label
from gilty.sampling.session import Recording


def title(recording: Recording) -> str:
    if len(recording.sessions) == 1:
        return f"gilty: {process_label(recording.sessions[0])}"
    return f"gilty: {len(recording.sessions)} processes ({', '.join(f'pid {p}' for p in recording.pids)})"


def subtitle(recording: Recording) -> str:
    duration = recording.duration_s
    if duration is None:
        duration = max((s.duration_s for s in recording.sessions), default=0.0)
    return f"{duration:.1f} s at {recording.rate_hz:g} Hz; frames under each thread are split by thread state"


def render(recording: Recording) -> str:
    native = launch.native_module()
    return native.flamegraph_svg(collapsed.lines(recording), title(recording), subtitle(recording), "samples")
