"""A judge on any score scale as the agent's metric: a score in [0, 1], higher is better.

The agent's optimizer needs one number per rollout, so each verdict is placed on its
scale's order, as the scale's kind places it (`judges.kinds`): P("Yes") for pass/fail,
the position in a numeric range, the expected value of the categories' numeric values
(Langfuse's; higher is taken as better) or, without values, their expected rank when
they are ranked. The expectation rather than the top answer keeps the ranking a small
judge can give. A scale with no better or worse has no such number and is refused,
with the fix. The interface is
`PointwiseJudge`'s (`p_pass_many`, `rationale`, `passes`), so `judges.agent_metric`
takes either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from infra.errors import UserFacingError
from infra.scales import ScoreScale
from judges.kinds import kind_of
from judges.parsing import Unparseable
from judges.scaled import ScaledJudge, ScaledVerdict
from judges.types import JudgedItem


class UnrankedScale(UserFacingError):
    """A scale on which no reply is better than another: it cannot steer an agent."""


def ranking_problem(scale: ScoreScale) -> str | None:
    """Why this scale cannot rank replies, as one sentence with the fix; None if it can."""
    return kind_of(scale).ranking_problem()


def check_ranked(scale: ScoreScale) -> None:
    problem = ranking_problem(scale)
    if problem:
        raise UnrankedScale(problem)


def placed_score(
    scale: ScoreScale, value: bool | str | float, probabilities: Mapping[str, float]
) -> float | None:
    """`value` placed on the scale's order in [0, 1], as `ScaledMetric` scores a verdict:
    by the judge's answer `probabilities`, or, with none (a person's label), as the one
    answer that says it; None: the scale has no order."""
    kind = kind_of(scale)
    if kind.span is None:
        return None
    if not probabilities and kind.answers is not None:
        said = kind.answer(value)
        probabilities = {answer: float(answer == said) for answer in kind.answers}
    return _position(kind.placed(value, probabilities), *kind.span)


def _position(placed: float, low: float, high: float) -> float:
    return min(max((placed - low) / (high - low), 0.0), 1.0)


class ScaledMetric:
    def __init__(self, judge: ScaledJudge, rationale_max_tokens: int = 48):
        check_ranked(judge.scale)
        self.judge, self.kind = judge, kind_of(judge.scale)
        self.low, self.high = self.kind.span
        self.threshold = self.kind.pass_cut(judge.threshold)
        self.rationale_max_tokens = rationale_max_tokens
        self.unparseable = 0  # verdicts scored 0.0 because their text could not be read
        self.failed = 0  # calls that failed for good: no verdict, no score

    def score(self, verdict: ScaledVerdict | Unparseable) -> float:
        if isinstance(verdict, Unparseable):
            return 0.0
        placed = self.kind.placed(verdict.value, verdict.probabilities)
        return _position(placed, self.low, self.high)

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

    async def choice_probabilities(
        self, item: JudgedItem, question: str, choices: list[str]
    ) -> list[float]:
        return await self.judge.choice_probabilities(item, question, choices)
