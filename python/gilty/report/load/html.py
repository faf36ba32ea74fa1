"""The HTML page of a load run (``load.result.LoadRun``)."""

from __future__ import annotations

from gilty.report.load.json import report


def render(run) -> str:
    """The shared HTML report: the load part (curve, steps, endpoints, loops) on top of the recording
    of the last profiled step (the one past the knee in a ramp); an empty recording without a profile."""
    from gilty.load.profile import PROFILE_RATE_HZ
    from gilty.report.recording import html as html_report
    from gilty.sampling.session import Recording

    data = report(run)
    rate, recording = run.step_recording if run.step_recording is not None else (None, Recording(rate_hz=PROFILE_RATE_HZ))
    data["recording_step"] = rate
    return html_report.render(recording, load=data)
