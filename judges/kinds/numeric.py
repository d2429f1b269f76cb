"""A number, in a range or not: the judge gives one.

With at most MAX_CHOICES integer steps the verdict is read from the probabilities of
the levels: their probability-weighted mean, clipped to the range. A continuous scale
has no answer set to read, so its verdict is parsed from text ("7", "Score: 7/10"); a
fraction over another scale's top ("3/10" on a 1-5 scale) is refused, since rescaling
it would be a guess. Closeness is the error as a share of the range; agreement is
weighted kappa on discrete levels (the verdict rounded to the nearest one), else
Spearman's rho. Several people's numbers on one trace agree at their mean.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.scales import ScoreScale
from judges.kinds.answered import Answered, ranked
from judges.kinds.text import STANDS_ALONE, NoVerdict, Value, leading
from judges.metrics import Metric, spearman

MAX_CHOICES = 11  # e.g. 0-10; beyond it, one log-probability pass per level costs too much
_NUMBER = r"-?\d+(?:\.\d+)?"
_SCORE = re.compile(rf"^[\s*_#>]*({_NUMBER})(?:\s*(?:/|out of)\s*({_NUMBER}))?", re.I)
_BARE = re.compile(_SCORE.pattern + STANDS_ALONE, re.I)


def closeness(error: float, scale: ScoreScale) -> float:
    """1 at the human's value, 0 a whole range away; 1 / (1 + error) with no range."""
    bounded = scale.minimum is not None and scale.maximum is not None
    span = scale.maximum - scale.minimum if bounded else 0.0
    return 1 - error / span if span else 1 / (1 + error)


@dataclass(frozen=True)
class Numeric(Answered):
    @property
    def answers(self) -> tuple[str, ...] | None:
        levels = self.scale.levels
        if levels is None or len(levels) > MAX_CHOICES:
            return None
        return tuple(str(int(v)) for v in levels)

    @property
    def question(self) -> str:
        low = "" if self.scale.minimum is None else f" from {self.scale.minimum:g}"
        high = "" if self.scale.maximum is None else f" to {self.scale.maximum:g}"
        return f"Score the reply{low}{high}. Answer with the number only."

    @property
    def primary(self) -> str:
        return "spearman" if self.scale.levels is None else "weighted_kappa"

    @property
    def span(self) -> tuple[float, float] | None:
        low, high = self.scale.minimum, self.scale.maximum
        return (low, high) if low is not None and high is not None and high > low else None

    def bare(self, text: str) -> tuple[str, str]:
        return leading(_BARE, text, "number")

    def read(self, raw: Any) -> float:
        scale, denominator = self.scale, None
        if isinstance(raw, str) and (m := _SCORE.match(raw)):
            raw, denominator = float(m.group(1)), m.group(2) and float(m.group(2))
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise NoVerdict(f"no verdict: {raw!r} is not a number")
        high = scale.maximum
        # "3/10" on a 1-5 scale is in range by accident: rescaling it would be a guess.
        if denominator is not None and high is not None and denominator != high:
            raise NoVerdict(
                f"out of range: {raw:g}/{denominator:g} is not on a scale up to {high:g}"
            )
        if not scale.contains(float(raw)):
            lo = "-inf" if scale.minimum is None else f"{scale.minimum:g}"
            hi = "inf" if scale.maximum is None else f"{scale.maximum:g}"
            raise NoVerdict(f"out of range: {raw:g} is outside [{lo}, {hi}]")
        return float(raw)

    def from_probabilities(self, probabilities: Mapping[str, float], threshold: float) -> float:
        mean = sum(float(a) * p for a, p in probabilities.items())
        return min(max(mean, self.scale.minimum), self.scale.maximum)

    def agreed(self, values: Sequence[Value]) -> float:
        return sum(float(v) for v in values) / len(values)

    def answer(self, value: Value) -> str:
        return str(int(value)) if float(value).is_integer() else f"{value:g}"

    def placed(self, value: Value, probabilities: Mapping[str, float]) -> float:
        return float(value)

    def _unranked(self, score: str, cannot: str) -> str:
        return (
            f"{score} is numeric without a range, {cannot}: give it a minimum below its "
            "maximum in its Langfuse score config."
        )

    def weights(self, values: Iterable[Value]) -> dict[Hashable, float]:
        return {}  # scored by distance, not by answer

    def credit(
        self,
        value: Value,
        probabilities: Mapping[str, float],
        human: Value,
        weights: Mapping[Hashable, float],
    ) -> float:
        return closeness(abs(value - human), self.scale)  # the expected value, or the parsed one

    def agreement_value(self, value: Value) -> Value:
        """On an integer scale the nearest level, so exact match and weighted kappa apply
        (ties round up)."""
        if self.scale.levels is not None:
            return float(math.floor(value + 0.5))
        return value

    def statistics(self, pred: Sequence[Any], gold: Sequence[Any]) -> list[tuple[str, Metric]]:
        return ranked(self.scale.levels, spearman, pred, gold)
