"""What the kinds a judge answers on directly share (categorical and numeric; pass/fail is
read at a threshold instead): the verdict is a value on the scale, sent and compared as
it is; its score is its place on the scale's order, cut at PASS_CUT; how sure the judge
is is its own margin (`ScaledVerdict.margin`). Values must be on the scale: a label off
it is an error, never read as something near. Ranked values are compared by rank
correlation, plus exact match and quadratic-weighted kappa when the levels are discrete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from infra.scales import ScoreScale
from judges.kinds.text import Value, show
from judges.metrics import Metric, accuracy, weighted_kappa

PASS_CUT = 0.5  # on the normalized score, for every scale but pass/fail (its threshold)


@dataclass(frozen=True)
class Answered:
    scale: ScoreScale

    pass_fail: ClassVar[bool] = False
    score_name: ClassVar[str] = "score"

    @property
    def span(self) -> tuple[float, float] | None:
        raise NotImplementedError

    def on_scale(self, value: Any) -> Value | None:
        return value if self.scale.contains(value) else None

    def agreed(self, values: Sequence[Value]) -> Value | None:
        return None  # no rule settles it: a person must

    def show(self, value: Value) -> str:
        return show(value)

    def stored(self, value: Value) -> Value:
        return value

    def pass_cut(self, threshold: float) -> float:
        return PASS_CUT

    def cut(self, threshold: float) -> str:
        return f"{self.scale.describe()} scale"

    def ranking_problem(self) -> str | None:
        if self.span is not None:
            return None
        score = f"The score {self.scale.name!r}" if self.scale.name else "The annotation score"
        return self._unranked(score, "so the judge cannot tell the agent which reply is better")

    def _unranked(self, score: str, cannot: str) -> str:
        """Why the scale has no order, as one sentence with the fix."""
        raise NotImplementedError

    def agreement_value(self, value: Value) -> Value:
        return value

    def check(self, values: Iterable[Any]) -> None:
        for value in values:
            if not self.scale.contains(value):
                raise ValueError(f"{value!r} is not on the {self.scale.kind} scale")

    def rates(self, pred: Sequence[Any], gold: Sequence[Any]) -> dict[str, float]:
        return {}

    def said(self, score: float, threshold: float, value: Value | None) -> Value | None:
        return value

    def distance(self, score: float, threshold: float, margin: float) -> float:
        return margin  # the verdict's own margin: the surest disagreements first

    def label_margins(
        self, scores: Mapping[str, float], margins: Mapping[str, float], threshold: float
    ) -> Mapping[str, float]:
        return margins

    def unsure(self, score: float, margin: float, threshold: float, value: Value | None) -> str:
        return f"margin {margin:.3f}, verdict {'unreadable' if value is None else self.show(value)}"


def ranked(
    levels: Sequence[Any] | None, by_rank: Metric, pred: Sequence[Any], gold: Sequence[Any]
) -> list[tuple[str, Metric]]:
    """The statistics of ranked values: `by_rank` (Spearman's rho on them), and before it
    exact match and weighted kappa when every value is one of the discrete `levels`; a
    numeric judge that answers between them (7.5 on a 1-10 scale) is continuous, and only
    the ranks compare."""
    metrics: list[tuple[str, Metric]] = [("spearman", by_rank)]
    if levels is not None and set(pred) | set(gold) <= set(levels):
        # Quadratic weights: the usual choice for rating scales (QWK).
        metrics[:0] = [
            ("accuracy", accuracy),
            ("weighted_kappa", lambda p, g: weighted_kappa(p, g, levels, "quadratic")),
        ]
    return metrics
