"""The agent's metric where people said what the reply should have been.

A labelled trace carries its right reply (`flows.night.collect.Collected.reply_targets`: a
person's correction, the teacher's from their comment, or the reply they passed). Where
the agent can compare a reply with it (`infra.agents.protocol.TargetScoring`), that
comparison is the score and the right reply is the feedback: what the labels say, at no
judge call. Everywhere else the judge scores and explains, as before."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from judges.agent_metric import RolloutJudge
from judges.types import JudgedItem

TargetScore = Callable[[str, str], "float | None"]  # (reply, right reply) -> score or None


class LabelledMetric:
    """A `RolloutJudge` that reads people's right replies before asking `judge`."""

    def __init__(self, judge: RolloutJudge, targets: Mapping[str, str], score: TargetScore):
        self.judge = judge
        self.targets = dict(targets)
        self.score = score
        self.by_labels = 0  # replies scored against a right reply, for the report

    def _known(self, item: JudgedItem) -> float | None:
        target = self.targets.get(item.id)
        return None if target is None else self.score(item.output_text, target)

    async def p_pass_many(self, items: list[JudgedItem]) -> list[float | None]:
        scores = [self._known(item) for item in items]
        unknown = [i for i, s in enumerate(scores) if s is None]
        self.by_labels += len(items) - len(unknown)
        if unknown:
            judged = await self.judge.p_pass_many([items[i] for i in unknown])
            for i, p in zip(unknown, judged, strict=True):
                scores[i] = p
        return scores

    async def rationale(self, item: JudgedItem) -> str:
        known = self._known(item)
        if known is None:
            return await self.judge.rationale(item)
        verdict = "says what" if self.judge.passes(known) else "does not say what"
        return (
            f"The reply {verdict} the right reply says; people said it is: {self.targets[item.id]}"
        )

    async def choice_probabilities(
        self, item: JudgedItem, question: str, choices: list[str]
    ) -> list[float]:
        """The judge's: a right reply says what the answer is, not which step missed it."""
        return await self.judge.choice_probabilities(item, question, choices)

    def passes(self, score: float) -> bool:
        return self.judge.passes(score)


def labelled_metric(agent: object, judge: RolloutJudge, targets: Mapping[str, str]) -> RolloutJudge:
    """`judge` itself where the agent cannot compare replies or nothing is labelled."""
    score = getattr(agent, "target_score", None)
    if score is None or not targets:
        return judge
    return LabelledMetric(judge, targets, score)
