"""Several criteria as one agent metric: the primary judge's score and each weighted
criterion's, averaged by weight.

GEPA keeps one score per rollout, so a criterion the settings weight (`traces.criteria`)
enters the objective as (primary + sum of weight x criterion) / (1 + sum of weights):
still in [0, 1], the primary's 1 beside the others' weights. The rationale, the pass
cut and the failed-step reading stay the primary's: the reflection is told why a reply
failed the criterion the agent is for, and a weighted criterion only moves which
candidates win.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from judges.agent_metric import RolloutJudge
from judges.types import JudgedItem


class WeightedMetric:
    def __init__(self, primary: RolloutJudge, weighted: Sequence[tuple[RolloutJudge, float]]):
        if any(weight <= 0 for _, weight in weighted):
            raise ValueError("a criterion of weight 0 is no part of the objective: leave it out")
        self.primary, self.weighted = primary, list(weighted)
        self.total = 1.0 + sum(weight for _, weight in weighted)

    @property
    def unparseable(self) -> int:
        """Verdicts any of its judges could not read (each scored 0 there)."""
        judges = [self.primary, *(judge for judge, _ in self.weighted)]
        return sum(getattr(judge, "unparseable", 0) for judge in judges)

    async def p_pass_many(self, items: list[JudgedItem]) -> list[float | None]:
        """Per item the weighted mean; None where any judge's call failed for good: a
        score without one criterion would rank the reply on the others alone."""
        scored = await asyncio.gather(
            self.primary.p_pass_many(items),
            *(judge.p_pass_many(items) for judge, _ in self.weighted),
        )
        weights = [1.0] + [weight for _, weight in self.weighted]
        return [
            None
            if any(s is None for s in scores)
            else sum(w * s for w, s in zip(weights, scores, strict=True)) / self.total
            for scores in zip(*scored, strict=True)
        ]

    async def rationale(self, item: JudgedItem) -> str:
        return await self.primary.rationale(item)

    async def choice_probabilities(
        self, item: JudgedItem, question: str, choices: list[str]
    ) -> list[float]:
        return await self.primary.choice_probabilities(item, question, choices)

    def passes(self, score: float) -> bool:
        return self.primary.passes(score)
