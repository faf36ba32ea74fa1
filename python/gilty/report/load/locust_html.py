"""The HTML page of a Locust run (``load.result.LocustResult``)."""

from __future__ import annotations

from gilty.report.load.locust_json import locust_report


def render(result) -> str:
    """The shared HTML report with the Locust part on top of the server's recording during the run."""
    from gilty.load.profile import PROFILE_RATE_HZ
    from gilty.report.recording import html as html_report
    from gilty.sampling.session import Recording

    recording = result.recording if result.recording is not None else Recording(rate_hz=PROFILE_RATE_HZ)
    return html_report.render(recording, load=locust_report(result.figures))
