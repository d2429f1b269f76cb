"""The verdict on a canary: the version that served `promotion.canary_share` of the traffic
since it went out, against production over the same period.

Unlike the gate's held-out examples, the two groups are different requests (each trace
was served by one label), so the comparison is unpaired: the difference of the mean
scores, with the 95% interval of a bootstrap that resamples each group on its own
(SciPy's). The interval decides, as in the gate: above zero the canary wins and is
promoted, below zero it loses and is rolled back, across zero nothing is shown yet and
it keeps serving its share. Too few traces in either group make any interval a coin
toss, so below `promotion.canary_min_traces` the canary is kept without a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import bootstrap

from infra.settings import PromotionSettings

Action = Literal["promote", "roll back", "keep"]


@dataclass(frozen=True)
class CanaryDecision:
    action: Action
    reason: str  # what was measured, with the numbers (`flows.night.canary_check` says more)
    canary: int  # traces the canary served in the period, scored
    production: int  # traces production served in the same period, scored
    gain: float | None = None  # mean score, canary minus production
    low: float | None = None  # the gain's 95% interval
    high: float | None = None


def judge_canary(
    canary: Sequence[float], production: Sequence[float], cfg: PromotionSettings, seed: int = 0
) -> CanaryDecision:
    """Promote, roll back or keep the canary, on its traces' scores and production's."""
    counts = len(canary), len(production)
    if min(counts) < cfg.canary_min_traces:
        reason = (
            f"only {counts[0]} canary and {counts[1]} production traces were scored since it "
            f"went out (promotion.canary_min_traces is {cfg.canary_min_traces} each)"
        )
        return CanaryDecision("keep", reason, *counts)
    gain, low, high = mean_gain(canary, production, cfg.resamples, seed)
    reason = (
        f"canary minus production {gain:+.3f} [{low:.3f}, {high:.3f}] on "
        f"{counts[0]} canary and {counts[1]} production traces"
    )
    action: Action = "promote" if low > 0 else "roll back" if high < 0 else "keep"
    return CanaryDecision(action, reason, *counts, gain, low, high)


def mean_gain(
    new: Sequence[float], old: Sequence[float], resamples: int, seed: int = 0
) -> tuple[float, float, float]:
    """Difference of means, `new` minus `old`, with its 95% percentile-bootstrap interval,
    each group resampled on its own. Percentile, not BCa: BCa's interval is undefined
    (NaN) when every score in a group is the same, as pass/fail scores often are."""
    a, b = np.asarray(new, dtype=float), np.asarray(old, dtype=float)
    found = bootstrap(
        (a, b),
        lambda x, y, axis: x.mean(axis=axis) - y.mean(axis=axis),
        n_resamples=resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    interval = found.confidence_interval
    return float(a.mean() - b.mean()), float(interval.low), float(interval.high)
