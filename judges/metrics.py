"""Agreement between a judge and the humans, on held-out labels.

Binary pass/fail for now: accuracy, Cohen's kappa, TPR/TNR, each with a bootstrap
confidence interval (resampling examples, fixed seed).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def accuracy(pred: Sequence[bool], gold: Sequence[bool]) -> float:
    _check(pred, gold)
    return sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold)


def cohen_kappa(pred: Sequence[bool], gold: Sequence[bool]) -> float:
    """Chance-corrected agreement. When both raters use one class only, agreement is
    perfect but chance agreement is 1 too: kappa is then defined as 1.0 if they agree
    everywhere and 0.0 otherwise, instead of 0/0."""
    _check(pred, gold)
    n = len(gold)
    observed = accuracy(pred, gold)
    p_pred, p_gold = sum(pred) / n, sum(gold) / n
    expected = p_pred * p_gold + (1 - p_pred) * (1 - p_gold)
    if expected == 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - expected) / (1 - expected)


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
    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap(
    metric: Callable[[Sequence[bool], Sequence[bool]], float],
    pred: Sequence[bool],
    gold: Sequence[bool],
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    _check(pred, gold)
    rng = random.Random(seed)
    n = len(gold)
    values = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        values.append(metric([pred[i] for i in idx], [gold[i] for i in idx]))
    values.sort()
    tail = (1 - level) / 2
    low = values[int(tail * (resamples - 1))]
    high = values[int((1 - tail) * (resamples - 1))]
    return Estimate(metric(pred, gold), low, high)


def agreement_report(pred: Sequence[bool], gold: Sequence[bool], seed: int = 0) -> dict[str, float]:
    """Flat metrics for MLflow and the summary; CIs as *_low / *_high."""
    report: dict[str, float] = {"n": float(len(gold))}
    for name, metric in (("accuracy", accuracy), ("kappa", cohen_kappa)):
        est = bootstrap(metric, pred, gold, seed=seed)
        report |= {name: est.value, f"{name}_low": est.low, f"{name}_high": est.high}
    for name, rate in (("tpr", true_positive_rate), ("tnr", true_negative_rate)):
        value = rate(pred, gold)
        if value is not None:
            report[name] = value
    return report


def _check(pred: Sequence[bool], gold: Sequence[bool]) -> None:
    if len(pred) != len(gold):
        raise ValueError(f"{len(pred)} verdicts for {len(gold)} labels")
    if not gold:
        raise ValueError("no labels to compare against")
