"""Named categories, ranked (ordinal) or not: the judge names one.

Its verdict is the most probable category, and a reply that names it in prose is read
as long as it names exactly one. A category's place on the scale is the source's numeric
value for it (Langfuse's; higher is taken as better) or, without values, its rank when
the categories are ranked; the expectation over the judge's probabilities, not the top
answer, keeps the ranking a small judge can give. Categories with neither have no
better or worse: agreement is then Cohen's kappa and the agent cannot be steered by them.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judges.calibration import balancing_weights
from judges.kinds.answered import Answered, ranked
from judges.kinds.text import NoVerdict, Value, unfenced
from judges.metrics import Metric, accuracy, cohen_kappa, spearman


@dataclass(frozen=True)
class Categorical(Answered):
    @property
    def answers(self) -> tuple[str, ...]:
        return self.scale.categories

    @property
    def question(self) -> str:
        return f"Answer with one of: {', '.join(self.scale.categories)}."

    @property
    def primary(self) -> str:
        return "weighted_kappa" if self.scale.ordinal else "kappa"

    @property
    def span(self) -> tuple[float, float] | None:
        if self._valued:
            low, high = min(self.scale.values), max(self.scale.values)
        else:  # the categories' ranks, when they are ranked
            low, high = 0.0, float(len(self.scale.categories) - 1) if self.scale.ordinal else None
        return (low, high) if high is not None and high > low else None

    @property
    def _valued(self) -> bool:
        """Whether categories are placed by their values: all equal ones place nothing."""
        return self.scale.values is not None and len(set(self.scale.values)) > 1

    def bare(self, text: str) -> tuple[str, str]:
        return text.strip().partition("\n")[0], unfenced(text)  # "Partially correct: ..."

    def read(self, raw: Any) -> str:
        scale = self.scale
        if isinstance(raw, int | float) and not isinstance(raw, bool) and scale.values:
            named = [c for c, v in zip(scale.categories, scale.values, strict=True) if v == raw]
            if len(named) == 1:  # a judge that answers with the Langfuse category value
                return named[0]
        if not isinstance(raw, str):
            raise NoVerdict(f"no verdict: {raw!r} is not a category name")
        matches = [
            (m.start(), m.end(), category)
            for category in scale.categories
            for m in re.finditer(rf"(?<!\w){re.escape(category)}(?!\w)", raw, re.I)
        ]
        # "partially correct" also contains "correct": a match inside a longer one is not one.
        named = {
            category
            for a, b, category in matches
            if not any(x <= a and b <= y and (x, y) != (a, b) for x, y, _ in matches)
        }
        if len(named) > 1:
            raise NoVerdict(f"ambiguous: {raw!r} names {', '.join(sorted(named))}")
        if not named:
            raise NoVerdict(f"no verdict: {raw!r} names none of {', '.join(scale.categories)}")
        return named.pop()

    def from_probabilities(self, probabilities: Mapping[str, float], threshold: float) -> str:
        return max(probabilities, key=probabilities.get)

    def answer(self, value: Value) -> str:
        return value

    def placed(self, value: Value, probabilities: Mapping[str, float]) -> float:
        scale = self.scale
        weights = scale.values if self._valued else range(len(scale.categories))
        return sum(probabilities[c] * w for c, w in zip(scale.categories, weights, strict=True))

    def _unranked(self, score: str, cannot: str) -> str:
        return (
            f"{score} has categories with no better or worse "
            f"({', '.join(self.scale.categories)}), {cannot}: give the categories distinct "
            "numeric values in its Langfuse score config, or set judge.ordinal_categories = "
            "true if they are listed worst to best."
        )

    def weights(self, values: Iterable[Value]) -> dict[Hashable, float]:
        return balancing_weights((self.answer(v) for v in values), self.answers)

    def credit(
        self,
        value: Value,
        probabilities: Mapping[str, float],
        human: Value,
        weights: Mapping[Hashable, float],
    ) -> float:
        answer = self.answer(human)
        return weights[answer] * probabilities[answer]

    def statistics(self, pred: Sequence[Any], gold: Sequence[Any]) -> list[tuple[str, Metric]]:
        if not self.scale.ordinal:
            return [("accuracy", accuracy), ("kappa", cohen_kappa)]
        rank = {category: i for i, category in enumerate(self.scale.categories)}
        return ranked(
            self.scale.levels,
            lambda p, g: spearman([rank[v] for v in p], [rank[v] for v in g]),
            pred,
            gold,
        )
