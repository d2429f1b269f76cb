"""Agreement statistics between a judge and the humans, on held-out labels.

Paired and scale-free: accuracy, Cohen's kappa, weighted kappa, Spearman's rho, TPR/TNR,
and a bootstrap confidence interval for any of them (resampling examples, fixed seed).
Which apply to a score is its scale kind's to say (`judges.kinds`; the report:
`judges.agreement`). Pairwise judges add the flip rate, their sensitivity to answer order.

Written out rather than called from scikit-learn and SciPy: the bootstrap calls each one
a thousand times per report, and `cohen_kappa_score` costs about 1.5 ms a call to these
functions' 15 us. tests/judges/test_metrics_against_libraries.py holds them to the
libraries' answers.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

Metric = Callable[[Sequence[Any], Sequence[Any]], float | None]


def accuracy(pred: Sequence[Hashable], gold: Sequence[Hashable]) -> float:
    _check(pred, gold)
    return sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold)


def cohen_kappa(pred: Sequence[Hashable], gold: Sequence[Hashable]) -> float:
    """Chance-corrected agreement over any labels. When both raters give one and the same
    label everywhere, agreement is perfect but so is chance agreement: kappa is then 1.0
    rather than 0/0 (scikit-learn's NaN)."""
    _check(pred, gold)
    n = len(gold)
    observed = accuracy(pred, gold)
    pred_counts, gold_counts = Counter(pred), Counter(gold)
    # In integers, so the one-class case is detected exactly rather than up to rounding.
    chance = sum(count * gold_counts[label] for label, count in pred_counts.items())
    if chance == n * n:
        return 1.0
    expected = chance / (n * n)
    return (observed - expected) / (1 - expected)


def weighted_kappa(
    pred: Sequence[Hashable],
    gold: Sequence[Hashable],
    categories: Sequence[Hashable],
    weights: str = "linear",
) -> float:
    """Cohen's kappa where a near miss costs less than a far one, on ordered
    `categories`: disagreement i vs j weighs |i-j|/(k-1) ("linear") or its square
    ("quadratic"). Same one-label convention as `cohen_kappa`."""
    _check(pred, gold)
    if weights not in ("linear", "quadratic"):
        raise ValueError(f"weights must be 'linear' or 'quadratic', not {weights!r}")
    index = {category: i for i, category in enumerate(categories)}
    if len(index) != len(categories):
        raise ValueError("categories must not repeat")
    for value in (*pred, *gold):
        if value not in index:
            raise ValueError(f"{value!r} is not one of the categories {list(categories)}")
    power = 1 if weights == "linear" else 2
    span = max(len(categories) - 1, 1)

    def cost(a: Hashable, b: Hashable) -> float:
        return (abs(index[a] - index[b]) / span) ** power

    n = len(gold)
    observed = sum(cost(p, g) for p, g in zip(pred, gold, strict=True)) / n
    pred_counts, gold_counts = Counter(pred), Counter(gold)
    expected = sum(
        cp * cg * cost(a, b) for a, cp in pred_counts.items() for b, cg in gold_counts.items()
    ) / (n * n)
    if expected == 0:  # both raters on one and the same category: no disagreement
        return 1.0
    return 1 - observed / expected


def spearman(pred: Sequence[float], gold: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson correlation of the ranks, ties sharing their average
    rank. None when either side is constant, where correlation is undefined."""
    _check(pred, gold)
    x, y = _ranks(pred), _ranks(gold)
    mean = (len(x) + 1) / 2  # the mean of ranks 1..n, ties or not
    sxy = sum((a - mean) * (b - mean) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mean) ** 2 for a in x)
    syy = sum((b - mean) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def flip_rate(first_order: Sequence[Hashable], second_order: Sequence[Hashable]) -> float:
    """Share of pairwise items whose verdict changes when the two answers are swapped.
    Both sequences must already name the same answer (e.g. "A"/"B"/"tie" mapped back
    after the swap), so any difference is position bias, not a relabelling."""
    _check(first_order, second_order)
    return 1 - accuracy(first_order, second_order)


def true_positive_rate(pred: Sequence[bool], gold: Sequence[bool]) -> float | None:
    _check(pred, gold)
    hits = [p for p, g in zip(pred, gold, strict=True) if g]
    return sum(hits) / len(hits) if hits else None


def true_negative_rate(pred: Sequence[bool], gold: Sequence[bool]) -> float | None:
    _check(pred, gold)
    rejects = [not p for p, g in zip(pred, gold, strict=True) if not g]
    return sum(rejects) / len(rejects) if rejects else None


@dataclass(frozen=True)
class Estimate:
    """A metric with its bootstrap interval. `value` is None when the metric is undefined
    on the full sample; `low`/`high` are None when it is undefined on most resamples,
    where percentiles of the few defined ones would overstate the certainty."""

    value: float | None
    low: float | None
    high: float | None

    def __str__(self) -> str:
        if self.value is None:
            return "undefined"
        if self.low is None or self.high is None:
            return f"{self.value:.3f} [no interval]"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap(
    metric: Metric,
    pred: Sequence[Any],
    gold: Sequence[Any],
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Percentile interval of any paired metric. Resamples where the metric is undefined
    (None, e.g. Spearman on a constant resample) are skipped; if fewer than half are
    defined there is no interval."""
    _check(pred, gold)
    rng = random.Random(seed)
    n = len(gold)
    values = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        value = metric([pred[i] for i in idx], [gold[i] for i in idx])
        if value is not None:
            values.append(value)
    point = metric(pred, gold)
    if 2 * len(values) < resamples:
        return Estimate(point, None, None)
    values.sort()
    tail = (1 - level) / 2
    low = values[int(tail * (len(values) - 1))]
    high = values[int((1 - tail) * (len(values) - 1))]
    return Estimate(point, low, high)


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start : end + 1]:
            ranks[i] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _check(pred: Sequence[Any], gold: Sequence[Any]) -> None:
    if len(pred) != len(gold):
        raise ValueError(f"{len(pred)} verdicts for {len(gold)} labels")
    if not gold:
        raise ValueError("no labels to compare against")
