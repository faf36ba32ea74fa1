"""What a load run means: per step throughput and percentiles against the SLO, the knee (the highest
rate that met it), Little's law, whether the generator kept up, and the limit at the knee."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

MAX_ERROR_SHARE = 0.01
# The generator is behind when its p99 lateness is large enough to change a verdict: a tenth of the
# SLO's limit (5 ms without one) and half the gap between arrivals; or when it used most of its CPU.
LAG_SHARE_OF_PERIOD = 0.5
LAG_SHARE_OF_SLO = 0.1
LAG_WITHOUT_SLO_S = 0.005
GENERATOR_CPU_SHARE = 0.9
# A percentile pXX from fewer than FEW_ANSWERS_FACTOR / (1 - XX/100) answers rests on one or two
# answers above it (a p99 from 30 answers is their maximum): the report says so. p50 needs 4, p90 20,
# p99 200, p99.9 2000.
FEW_ANSWERS_FACTOR = 2


def min_answers(percentile: str) -> int:
    """The fewest answers a percentile ("p99", "p99_9") is read from without a warning."""
    q = float(percentile[1:].replace("_", ".")) / 100.0
    return int(round(FEW_ANSWERS_FACTOR / (1.0 - q)))


@dataclass
class StepVerdict:
    rate: float
    throughput: float  # successful answers per second of the step's window
    error_share: float
    percentile_s: Optional[float]  # the SLO's percentile (p99 without an SLO)
    service_percentile_s: Optional[float]  # the same percentile from the actual send (without the generator's delay)
    meets_slo: bool
    generator_behind: bool
    littles_l: float  # time-average requests in flight (sum of send-to-answer times / window)
    littles_lw: float  # answers per second x mean send-to-answer time
    answers: int = 0  # the answers the percentile is read from
    few_answers: bool = False  # fewer than min_answers(percentile): the percentile is not to be trusted
    percentile: str = "p99"


def error_share(step: dict) -> float:
    total = step["ok"] + sum(step["errors"].values()) + step["dropped"]
    return (total - step["ok"]) / total if total else 0.0


def generator_behind(step: dict, slo: Optional[tuple] = None) -> bool:
    period = 1.0 / step["requested_rate"]
    gen = step["generator"]
    allowed = LAG_SHARE_OF_SLO * slo[1] if slo else LAG_WITHOUT_SLO_S
    lagging = gen["lag_p99_s"] > max(LAG_SHARE_OF_PERIOD * period, allowed)
    saturated = step["wall_s"] > 0 and gen["cpu_s"] / step["wall_s"] >= GENERATOR_CPU_SHARE * gen["threads"]
    return lagging or saturated


def judge(step: dict, slo: Optional[tuple]) -> StepVerdict:
    key, limit = slo if slo else ("p99", None)
    value = step["latency_s"].get(key)
    window = step["window_s"] or 1.0
    throughput = step["ok"] / window
    share = error_share(step)
    meets = share <= MAX_ERROR_SHARE and (limit is None or (value is not None and value <= limit))
    mean = step["service_s"].get("mean") or 0.0
    return StepVerdict(
        rate=step["requested_rate"],
        throughput=throughput,
        error_share=share,
        percentile_s=value,
        service_percentile_s=step["service_s"].get(key),
        meets_slo=meets,
        generator_behind=generator_behind(step, slo),
        littles_l=step["in_flight_mean"],
        littles_lw=(step["completed"] / window) * mean,
        answers=_answers(step),
        few_answers=_answers(step) < min_answers(key),
        percentile=key,
    )


def _answers(step: dict) -> int:
    # Latency is recorded for every answer, errors with a status included; timeouts have none.
    return int(step.get("completed", step["ok"]))


@dataclass
class Knee:
    rate: Optional[float]  # the highest rate that met the SLO; None when even the first did not
    max_throughput: float
    effective_concurrency: Optional[float]  # max throughput x the lowest-load mean service time
    limit: str  # "concurrency" | "generator" | "none reached" | a profile-based cause
    explanation: str


@dataclass
class KneeReading:
    """The knee before it is put in one sentence: what stopped holding (``condition``) and why
    (``cause``), kept apart so that a profile's cause can replace the generic one, with what else
    slowed the server (``also``) and caveats (``notes``)."""

    rate: Optional[float]
    max_throughput: float
    effective_concurrency: Optional[float]
    limit: str
    condition: str
    cause: Optional[str] = None
    also: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def knee(self) -> Knee:
        words = self.condition if self.cause is None else f"{self.condition}; {self.cause}"
        if self.also:
            words += ". Also: " + "; ".join(self.also)
        if self.notes:
            words += ". Note: " + "; ".join(self.notes)
        return Knee(self.rate, self.max_throughput, self.effective_concurrency, self.limit, words)


def read_knee(steps: list, verdicts: list, slo: Optional[tuple]) -> KneeReading:
    passing = [v for v in verdicts if v.meets_slo]
    rate = max((v.rate for v in passing), default=None)
    max_tp = max((v.throughput for v in verdicts), default=0.0)
    base = steps[0]["service_s"].get("mean") if steps else None
    concurrency = max_tp * base if base else None
    failing = [v for v in verdicts if not v.meets_slo]
    slo_text = f"{slo[0].replace('_', '.')} <= {slo[1] * 1e3:g} ms" if slo else "errors <= 1%"
    if not failing:
        return KneeReading(
            rate, max_tp, concurrency, "none reached", f"every step met {slo_text}; the knee is above {verdicts[-1].rate:g} rps"
        )
    first_bad = failing[0]
    # The generator is to blame only if, without its own delay, the step would have passed.
    server_slow = slo is not None and first_bad.service_percentile_s is not None and first_bad.service_percentile_s > slo[1]
    if first_bad.generator_behind and not server_slow:
        return KneeReading(
            rate,
            max_tp,
            concurrency,
            "generator",
            f"at {first_bad.rate:g} rps the generator itself fell behind its schedule; the server's limit is not measured",
        )
    c = f"{concurrency:.1f}" if concurrency is not None else "?"
    return KneeReading(
        rate,
        max_tp,
        concurrency,
        "concurrency",
        (
            f"above {rate:g} rps {slo_text} no longer holds"
            if rate is not None
            else f"already at {first_bad.rate:g} rps {slo_text} does not hold"
        ),
        f"the server completes at most {max_tp:.0f} rps, i.e. about {c} requests at a time at its low-load service time",
    )


def find_knee(steps: list, verdicts: list, slo: Optional[tuple]) -> Knee:
    return read_knee(steps, verdicts, slo).knee()


def knee_notes(verdicts: list, knee) -> list:
    """Caveats on the knee: the percentiles that decided it rest on too few answers."""
    deciding = [v for v in verdicts if v.rate == knee.rate or not v.meets_slo][:2]
    few = [v for v in deciding if v.few_answers]
    if not few:
        return []
    key = few[0].percentile
    return [
        f"{key.replace('_', '.')} at {' and '.join(f'{v.rate:g}' for v in few)} rps is read from "
        f"{' and '.join(str(v.answers) for v in few)} answers (fewer than {min_answers(key)}): "
        "it is about the slowest answer, not a percentile"
    ]
