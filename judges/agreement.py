"""Agreement between a judge and the humans on the score's own scale, as one report.

Which statistics make sense depends on the scale, and saying which is its kind's
(`judges.kinds`): pass/fail gets accuracy, Cohen's kappa and TPR/TNR; named categories
get accuracy and kappa; ranked scores get weighted kappa and Spearman's rho (plus
exact-match accuracy when the levels are discrete). Each comes with a bootstrap
confidence interval (`judges.metrics.bootstrap`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.scales import ScoreScale
from judges.kinds import kind_of
from judges.metrics import bootstrap


def primary_metric(scale: ScoreScale) -> str:
    """The `agreement_report` key that decides between judges on this scale, and that the
    judge gate compares."""
    return kind_of(scale).primary


def agreement_report(
    pred: Sequence[Any], gold: Sequence[Any], seed: int = 0, *, scale: ScoreScale | None = None
) -> dict[str, float]:
    """Flat metrics for MLflow and the summary, chosen by the scale (boolean when None);
    CIs as *_low / *_high. A metric undefined on this sample is left out, since MLflow
    takes numbers only."""
    kind = kind_of(scale or ScoreScale("boolean"))
    kind.check((*pred, *gold))
    report: dict[str, float] = {"n": float(len(gold))}
    for name, metric in kind.statistics(pred, gold):
        est = bootstrap(metric, pred, gold, seed=seed)
        estimates = {name: est.value, f"{name}_low": est.low, f"{name}_high": est.high}
        report |= {key: value for key, value in estimates.items() if value is not None}
    return report | kind.rates(pred, gold)
