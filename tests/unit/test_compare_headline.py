"""`gilty compare` of two load runs leads with the change that matters (issue 31, item 12): the knee
and an event loop's lag first, a figure whose noise cannot be estimated marked `?` rather than counted
as within noise, and a large change called noise says why. The runs are load reports as `gilty load`
writes them, reduced to the fields compare reads."""

from __future__ import annotations

from gilty.load.run_diff import compare_load
from gilty.report.compare.json import render_json
from gilty.report.compare.text import render_text


def _second(t: int, p50: float) -> dict:
    return {
        "t": t,
        "completed": 50,
        "errors": 0,
        "sent": 50,
        "dropped": 0,
        "latency_s": {"p50": p50, "p90": p50 * 1.5, "p99": p50 * 2},
    }


def _step(rate: float, p50s: list, lag: float) -> dict:
    mean = sum(p50s) / len(p50s)
    return {
        "requested_rate": rate,
        "window_s": float(len(p50s)),
        "ok": 50 * len(p50s),
        "seconds": [_second(t, v) for t, v in enumerate(p50s)],
        "latency_s": {"p50": mean, "p90": mean * 1.5, "p99": mean * 2},
        "verdict": {"error_share": 0.0},
        "per_request": [],
        "profile": {"endpoints": [], "memory": [], "rate_hz": 200.0, "loops": [{"thread": "MainThread", "lag_share": lag}]},
    }


def _run(knee: float, p50s: list, lag: float) -> dict:
    return {"kind": "load", "steps": [_step(50.0, p50s, lag)], "knee": {"rate": knee, "max_throughput": knee + 5}}


# Before: the table, then "N of M figures differ beyond noise", no headline; the knee and the loop's
# lag (noise unknown) read as within noise; a p50 of 242 -> 50 ms called noise without a word.
A = _run(30.0, [0.600, 0.030, 0.100], 0.72)  # one slow second: the seconds disagree widely
B = _run(90.0, [0.050, 0.049, 0.051], 0.02)


def test_the_headline_is_the_knee_and_the_loop_lag():
    text = render_text("a.json", "b.json", "load", compare_load(A, B))
    first = text.splitlines()[2]
    assert first.startswith("Headline: knee 30 → 90 rps (better)"), text
    assert "loop lag of MainThread at 50 rps 72 % → 2 % (better)" in first, text


def test_figures_of_unknown_noise_are_marked_not_counted_within_noise():
    rows = compare_load(A, B)
    text = render_text("a.json", "b.json", "load", rows)
    knee = next(line for line in text.splitlines() if line.strip().startswith("knee") and " rate " in line)
    assert knee.rstrip().endswith("<- ? noise unknown"), knee
    summary = text.splitlines()[-2] if text.splitlines()[-1].startswith("Within noise") else text.splitlines()[-1]
    assert "noise unknown (?)" in text and "within noise" in text, text
    import json

    data = json.loads(render_json("a.json", "b.json", "load", rows))
    assert data["headline"][0].startswith("knee 30 → 90 rps"), data["headline"]
    assert any(r["noise_unknown"] for r in data["rows"] if r["metric"] == "rate"), data["rows"]
    assert summary


def test_a_large_change_called_noise_says_why():
    text = render_text("a.json", "b.json", "load", compare_load(A, B))
    why = next((line for line in text.splitlines() if "p50" in line and "is within noise" in line), None)
    assert why is not None, text
    assert "243.3 ms → 50.0 ms" in why and "seconds" in why, why


def test_latency_leads_the_servers_inner_figures():
    # Seen in CI: server threads 0.93 -> 1.40 (+50 %) outranked the median 20.7 -> 30.5 ms (+48 %), and the
    # headline's three places went to server threads, p99 and p90: what users feel leads now.
    from gilty.load.run_diff import Row

    rows = [
        Row("step 50 rps endpoint Handler.do_GET", "server_threads", 0.93, 1.40, 0.47, 0.05, True),
        Row("step 50 rps", "p50_s", 0.0207, 0.0305, 0.0098, 0.002, True),
        Row("step 50 rps", "p90_s", 0.0210, 0.0310, 0.0100, 0.002, True),
        Row("step 50 rps", "p99_s", 0.0223, 0.0335, 0.0112, 0.003, True),
    ]
    first = render_text("a.json", "b.json", "load", rows).splitlines()[2]
    assert "step 50 rps p50_s 20.7 ms → 30.5 ms (worse)" in first, first
    assert "server_threads" not in first, first
