"""A pointwise judge whose verdict follows the humans' score config.

Boolean, categorical and small numeric scales are read the way the pass/fail judge is:
from the probabilities the model gives to each possible answer, not from its text
(small models' written verdicts sit at chance); what the answers are and which verdict
their probabilities give is the scale's kind's (`judges.kinds`: the most probable
category, the probability-weighted mean of a numeric scale's levels). A continuous
numeric scale has no answer set to read, so its verdict is parsed from text, and an
unparseable answer is returned as such, never defaulted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.lm import LM
from infra.scales import ScoreScale
from judges.calls import each
from judges.kinds import kind_of
from judges.parsing import ParsedVerdict, Unparseable, parse_verdict
from judges.pointwise import judge_messages, normalized
from judges.types import JudgedItem


@dataclass(frozen=True)
class ScaledVerdict:
    value: bool | str | float
    probabilities: dict[str, float]  # each answer the model could give, normalized
    margin: float  # top answer's probability minus the runner-up's: low = unsure


def answers(scale: ScoreScale) -> tuple[str, ...] | None:
    """The answers whose probabilities carry the verdict; None: read it from text."""
    return kind_of(scale).answers


class ScaledJudge:
    def __init__(
        self,
        lm: LM,
        prompts: dict[str, str],
        scale: ScoreScale,
        threshold: float = 0.5,  # boolean only: the cut on P("Yes")
        text_max_tokens: int = 64,
    ):
        self.lm, self.prompts, self.scale = lm, prompts, scale
        self.threshold, self.text_max_tokens = threshold, text_max_tokens
        self.kind = kind_of(scale)
        self.answers = self.kind.answers

    def messages(self, item: JudgedItem, ask: str) -> list[dict[str, str]]:
        return judge_messages(self.prompts["rubric"], item, ask)

    async def verdict(self, item: JudgedItem) -> ScaledVerdict | Unparseable:
        if self.answers is None:
            parsed = await self.text_verdict(item)
            if isinstance(parsed, Unparseable):
                return parsed
            return ScaledVerdict(parsed.value, {}, math.nan)
        logps = await self.lm.choice_logprobs(
            self.messages(item, self.kind.question), list(self.answers)
        )
        weights = [math.exp(lp) for lp in logps]
        total = sum(weights) or 1.0
        probs = {a: w / total for a, w in zip(self.answers, weights, strict=True)}
        ranked = sorted(probs.values(), reverse=True)
        margin = ranked[0] - (ranked[1] if len(ranked) > 1 else 0.0)
        return ScaledVerdict(self.kind.from_probabilities(probs, self.threshold), probs, margin)

    async def verdicts(self, items: list[JudgedItem]) -> list[ScaledVerdict | Unparseable | None]:
        """Per item its verdict; None where the call failed for good (`judges.calls`)."""
        return await each(items, self.verdict)

    async def choice_probabilities(
        self, item: JudgedItem, question: str, choices: list[str]
    ) -> list[float]:
        """As `PointwiseJudge.choice_probabilities`: each choice's normalized probability."""
        return normalized(await self.lm.choice_logprobs(self.messages(item, question), choices))

    async def rationale(self, item: JudgedItem, max_tokens: int = 48) -> str:
        """A one-sentence reason, for reflective feedback and scores' comments."""
        completion = await self.lm.complete(
            self.messages(item, "In one sentence: how good is the reply, and why?"),
            max_tokens=max_tokens,
            temperature=0.0,
        )
        return completion.text.strip()

    async def text_verdict(self, item: JudgedItem) -> ParsedVerdict | Unparseable:
        """The model's written verdict and rationale, parsed for this scale."""
        ask = f"{self.kind.question} Then give a one-sentence rationale."
        completion = await self.lm.complete(
            self.messages(item, ask), max_tokens=self.text_max_tokens, temperature=0.0
        )
        return parse_verdict(completion.text, self.scale)
