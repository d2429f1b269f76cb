"""A judge on any score scale as the agent's metric: a score in [0, 1], higher is better.

The agent's optimizer needs one number per rollout, so each verdict is placed on its
scale's order: P("Yes") for pass/fail, the position in a numeric range, the expected
value of the categories' numeric values (Langfuse's; higher is taken as better) or,
without values, their expected rank when they are ranked. The expectation rather than
the top answer keeps the ranking a small judge can give. A scale with no better or
worse has no such number and is refused, with the fix. The interface is
`PointwiseJudge`'s (`p_pass_many`, `rationale`, `passes`), so `judges.agent_metric`
takes either.
"""

from __future__ import annotations

import math

from infra.errors import UserFacingError
from infra.scales import ScoreScale
from judges.parsing import Unparseable
from judges.scaled import ScaledJudge, ScaledVerdict
from judges.types import JudgedItem

PASS_CUT = 0.5  # on the normalized score, for every scale but pass/fail (its threshold)


class UnrankedScale(UserFacingError):
    """A scale on which no reply is better than another: it cannot steer an agent."""


def ranking_problem(scale: ScoreScale) -> str | None:
    """Why this scale cannot rank replies, as one sentence with the fix; None if it can."""
    if _span(scale) is not None:
        return None
    score = f"The score {scale.name!r}" if scale.name else "The annotation score"
    cannot = "so the judge cannot tell the agent which reply is better"
    if scale.kind == "categorical":
        return (
            f"{score} has categories with no better or worse ({', '.join(scale.categories)}), "
            f"{cannot}: give the categories distinct numeric values in its Langfuse score "
            "config, or set judge.ordinal_categories = true if they are listed worst to best."
        )
    return (
        f"{score} is numeric without a range, {cannot}: give it a minimum below its maximum "
        "in its Langfuse score config."
    )


def check_ranked(scale: ScoreScale) -> None:
    problem = ranking_problem(scale)
    if problem:
        raise UnrankedScale(problem)


def _span(scale: ScoreScale) -> tuple[float, float] | None:
    """(worst, best) of the quantity a verdict is placed by; None: no order."""
    if scale.kind == "boolean":
        low, high = 0.0, 1.0
    elif scale.kind == "numeric":
        low, high = scale.minimum, scale.maximum
    elif _valued(scale):
        low, high = min(scale.values), max(scale.values)
    else:  # the categories' ranks, when they are ranked
        low, high = 0.0, float(len(scale.categories) - 1) if scale.ordinal else None
    return (low, high) if low is not None and high is not None and high > low else None


def _valued(scale: ScoreScale) -> bool:
    """Whether categories are placed by their values: all equal ones place nothing."""
    return scale.values is not None and len(set(scale.values)) > 1


class ScaledMetric:
    def __init__(self, judge: ScaledJudge, rationale_max_tokens: int = 48):
        check_ranked(judge.scale)
        self.judge = judge
        self.low, self.high = _span(judge.scale)
        self.threshold = judge.threshold if judge.scale.kind == "boolean" else PASS_CUT
        self.rationale_max_tokens = rationale_max_tokens
        self.unparseable = 0  # verdicts scored 0.0 because their text could not be read
        self.failed = 0  # calls that failed for good: no verdict, no score

    def score(self, verdict: ScaledVerdict | Unparseable) -> float:
        if isinstance(verdict, Unparseable):
            return 0.0
        position = (self._placed(verdict) - self.low) / (self.high - self.low)
        return min(max(position, 0.0), 1.0)

    def margin(self, verdict: ScaledVerdict | Unparseable, score: float) -> float:
        """How sure the verdict is, the smaller the less: the gap between its two likeliest
        answers; a written verdict (no probabilities) by its distance from the pass cut;
        an unreadable one 0, where a human label teaches the judge most."""
        if isinstance(verdict, Unparseable):
            return 0.0
        return verdict.margin if math.isfinite(verdict.margin) else abs(score - self.threshold)

    async def judged(
        self, items: list[JudgedItem]
    ) -> list[tuple[ScaledVerdict | Unparseable, float] | None]:
        """Per item (verdict, score); None where the call failed for good."""
        verdicts = await self.judge.verdicts(items)
        self.unparseable += sum(isinstance(v, Unparseable) for v in verdicts)
        self.failed += verdicts.count(None)
        return [None if v is None else (v, self.score(v)) for v in verdicts]

    async def p_pass_many(self, items: list[JudgedItem]) -> list[float | None]:
        """The normalized scores, under the name `PointwiseJudge` gives its own."""
        return [None if j is None else j[1] for j in await self.judged(items)]

    def passes(self, score: float) -> bool:
        return score >= self.threshold

    async def rationale(self, item: JudgedItem) -> str:
        return await self.judge.rationale(item, self.rationale_max_tokens)

    def _placed(self, verdict: ScaledVerdict) -> float:
        scale, probs = self.judge.scale, verdict.probabilities
        if scale.kind == "boolean":
            return probs["Yes"]
        if scale.kind == "numeric":
            return float(verdict.value)
        weights = scale.values if _valued(scale) else range(len(scale.categories))
        return sum(probs[c] * w for c, w in zip(scale.categories, weights, strict=True))
