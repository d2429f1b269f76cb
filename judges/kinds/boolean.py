"""Pass/fail: the kind the flywheel began on, and the only one read at a threshold.

Its verdict is P("Yes") against a pass cut calibrated on people's labels
(`judges.calibration`), so the score in [0, 1] is that probability itself, how sure the
judge is is its distance from the cut, and agreement is Cohen's kappa with the true
positive and negative rates beside it. Only this kind's judge is the probability judge
(`judges.pointwise`), and only that one has a LoRA step, a reward head and an injection
check (`pass_fail`). Labels stay lenient: Langfuse stores a boolean as 1.0 / 0.0, so
both that and True / False are read.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from infra.scales import ScoreScale
from judges.active_learning import threshold_margins
from judges.calibration import balancing_weights
from judges.kinds.text import STANDS_ALONE, NoVerdict, Value, leading
from judges.metrics import (
    Metric,
    accuracy,
    cohen_kappa,
    true_negative_rate,
    true_positive_rate,
)

ANSWERS = ("Yes", "No")  # the tokens whose probabilities carry the verdict, pass first
QUESTION = "Does the reply pass? Answer Yes or No."
BOOLEAN_WORDS = {
    **dict.fromkeys(("yes", "pass", "passed", "true"), True),
    **dict.fromkeys(("no", "fail", "failed", "false"), False),
}
_WORDS = "|".join(BOOLEAN_WORDS)
_BARE = re.compile(rf"^[\s*_#>]*({_WORDS})" + STANDS_ALONE, re.I)
_WORD = re.compile(rf"\b({_WORDS})\b", re.I)


@dataclass(frozen=True)
class PassFail:
    scale: ScoreScale = ScoreScale("boolean")

    pass_fail: ClassVar[bool] = True
    answers: ClassVar[tuple[str, ...]] = ANSWERS
    question: ClassVar[str] = QUESTION
    primary: ClassVar[str] = "kappa"
    span: ClassVar[tuple[float, float]] = (0.0, 1.0)  # P("Yes") is its own score
    score_name: ClassVar[str] = "p_pass"

    def bare(self, text: str) -> tuple[str, str]:
        return leading(_BARE, text, "yes/no, pass/fail or true/false")

    def read(self, raw: Any) -> bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, int | float) and raw in (0, 1):  # Langfuse stores booleans as 1/0
            return bool(raw)
        if not isinstance(raw, str):
            raise NoVerdict(f"no verdict: {raw!r} is not a boolean")
        found = {BOOLEAN_WORDS[w.lower()] for w in _WORD.findall(raw)}
        if len(found) > 1:
            raise NoVerdict(f"ambiguous: {raw!r} says both pass and fail")
        if not found:
            raise NoVerdict(f"no verdict: {raw!r} is not yes/no, pass/fail or true/false")
        return found.pop()

    def from_probabilities(self, probabilities: Mapping[str, float], threshold: float) -> bool:
        return probabilities[ANSWERS[0]] >= threshold

    def on_scale(self, value: Any) -> Value | None:
        if value in (0, 1):
            value = value == 1  # Langfuse gives a boolean as 1.0 / 0.0
        return value if self.scale.contains(value) else None

    def agreed(self, values: Sequence[Value]) -> Value | None:
        return None  # a pass against a fail: a person must settle it

    def answer(self, value: Value) -> str:
        return ANSWERS[0] if value else ANSWERS[1]

    def show(self, value: Value) -> str:
        return self.answer(value)

    def stored(self, value: Value) -> float:
        return 1.0 if value else 0.0

    def placed(self, value: Value, probabilities: Mapping[str, float]) -> float:
        return probabilities[ANSWERS[0]]

    def pass_cut(self, threshold: float) -> float:
        return threshold

    def cut(self, threshold: float) -> str:
        return f"threshold {threshold:.3f}"

    def ranking_problem(self) -> str | None:
        return None  # a pass is better than a fail

    def weights(self, values: Iterable[Value]) -> dict[Hashable, float]:
        return balancing_weights((self.answer(v) for v in values), ANSWERS)

    def credit(
        self,
        value: Value,
        probabilities: Mapping[str, float],
        human: Value,
        weights: Mapping[Hashable, float],
    ) -> float:
        answer = self.answer(human)
        return weights[answer] * probabilities[answer]

    def agreement_value(self, value: Value) -> Value:
        return value

    def check(self, values: Iterable[Any]) -> None:
        pass  # lenient: 1.0/0.0 and True/False both work

    def statistics(self, pred: Sequence[Any], gold: Sequence[Any]) -> list[tuple[str, Metric]]:
        return [("accuracy", accuracy), ("kappa", cohen_kappa)]

    def rates(self, pred: Sequence[Any], gold: Sequence[Any]) -> dict[str, float]:
        found = {"tpr": true_positive_rate(pred, gold), "tnr": true_negative_rate(pred, gold)}
        return {name: rate for name, rate in found.items() if rate is not None}

    def said(self, score: float, threshold: float, value: Value | None) -> bool:
        return score >= threshold

    def distance(self, score: float, threshold: float, margin: float) -> float:
        return abs(score - threshold)

    def label_margins(
        self, scores: Mapping[str, float], margins: Mapping[str, float], threshold: float
    ) -> Mapping[str, float]:
        return threshold_margins(scores, threshold)

    def unsure(self, score: float, margin: float, threshold: float, value: Value | None) -> str:
        return f"p_pass {score:.3f} vs threshold {threshold:.3f}"
