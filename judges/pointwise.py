"""A pointwise pass/fail judge that reads token probabilities, not its own text.

On small models the text verdict sits at chance while P("Yes") vs P("No") carries the
signal (see shared data README), so the verdict is that probability against a
threshold calibrated on human labels. A judge with a reward head (`judges.reward_head`)
reads P(pass) from the model's features for the same prompt instead. A short rationale
is generated only when someone needs words: the reflective feedback for the optimizer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.lm import LM, ModelCallFailed
from judges.adapter import ServedJudgeAdapter, served
from judges.calls import each
from judges.judged_text import DATA_NOTE, as_data
from judges.kinds.boolean import ANSWERS, QUESTION
from judges.memory import ReviewedMemory
from judges.reward_head import RewardHead, not_applicable
from judges.types import JudgedItem

SEED_JUDGE_PROMPTS = {
    "rubric": (
        "You review replies of an assistant. A reply passes when it correctly and "
        "clearly does what the user's request asks. A reply fails when it is wrong, "
        "off-topic, or does not give the answer."
    ),
}
# The pass/fail kind's (`judges.kinds.boolean`): what a LoRA record on a label completes
# with is what the judge is read on, P(Yes) vs P(No).
CHOICES = ANSWERS
PASS_QUESTION = QUESTION


def seed_judge_prompts(rubric: str | None = None) -> dict[str, str]:
    """The judge's prompts before any alignment: the task's `rubric`, else the generic one."""
    return {"rubric": rubric or SEED_JUDGE_PROMPTS["rubric"]}


def judge_messages(
    rubric: str, item: JudgedItem, question: str, memory: ReviewedMemory | None = None
) -> list[dict[str, str]]:
    """The chat every pointwise judge sends: its rubric, the exchange as declared data
    (`judges.judged_text`), the reviewers' notes on alike requests if it has a `memory`,
    the question."""
    exchange = f"{as_data('request', item.input_text)}\n\n{as_data('reply', item.output_text)}"
    if memory is not None:  # after the reply, nearest the question: a small model reads
        exchange += f"\n\n{memory.notes(item)}"  # what is close to where it answers
    return [
        {"role": "system", "content": f"{rubric}\n\n{DATA_NOTE}"},
        {"role": "user", "content": f"{exchange}\n\n{question}"},
    ]


@dataclass(frozen=True)
class Verdict:
    p_pass: float
    passed: bool


class PointwiseJudge:
    def __init__(
        self,
        lm: LM,
        prompts: dict[str, str],
        threshold: float = 0.5,
        rationale_max_tokens: int = 48,
        adapter: str | None = None,
        memory: ReviewedMemory | None = None,
        head: str | None = None,
    ):
        self.lm = lm
        self.prompts = prompts
        self.threshold = threshold
        self.rationale_max_tokens = rationale_max_tokens
        # the judge's own LoRA adapter (its folder), served beside the agent's
        self.adapter = ServedJudgeAdapter(lm, adapter) if adapter else None
        # a reward head (its folder): P(pass) from the model's features, not its verdict
        self.head, self.head_folder = (_head(lm, head) if head else None), head
        # reviewed exchanges whose notes it reads (`judges.memory`); an adapter or a head
        # fitted on such notes keeps them in its folder, and is never read without them
        if memory is None:
            memory = ReviewedMemory.beside(adapter) or ReviewedMemory.beside(head)
        self.memory = memory
        self.unparseable = 0  # P(pass) is always readable, unlike a written verdict
        self.failed = 0  # calls that failed for good (`judges.calls`): no verdict at all

    def messages(self, item: JudgedItem, question: str) -> list[dict[str, str]]:
        return judge_messages(self.prompts["rubric"], item, question, self.memory)

    async def p_pass(self, item: JudgedItem) -> float:
        if self.head is not None:
            messages, adapter = self.messages(item, PASS_QUESTION), await served(self.adapter)
            try:
                features = await self.lm.features(messages, adapter=adapter)
            except NotImplementedError as err:
                raise RuntimeError(
                    f"The judge's reward head ({self.head_folder}) reads the judge model's "
                    f"features, which {type(self.lm).__name__} does not return: {err}"
                ) from err
            return self.head.p_pass(features)
        logps = await self.lm.choice_logprobs(
            self.messages(item, PASS_QUESTION), list(CHOICES), adapter=await served(self.adapter)
        )
        yes, no = (math.exp(lp) for lp in logps)
        if yes + no <= 0:  # neither answer has any weight: no verdict to read
            raise ModelCallFailed("malformed", "P(Yes) and P(No) are both 0")
        return yes / (yes + no)

    async def p_pass_many(self, items: list[JudgedItem]) -> list[float | None]:
        """P(pass) per item; None where the call failed for good (counted in `failed`)."""
        probs = await each(items, self.p_pass)
        self.failed += probs.count(None)
        return probs

    def passes(self, p_pass: float) -> bool:
        return p_pass >= self.threshold

    async def verdict(self, item: JudgedItem) -> Verdict:
        p = await self.p_pass(item)
        return Verdict(p, self.passes(p))

    async def choice_probabilities(
        self, item: JudgedItem, question: str, choices: list[str]
    ) -> list[float]:
        """How likely the judge answers `question` on `item` with each of `choices`,
        normalized over them: a structured answer read from token probabilities."""
        logps = await self.lm.choice_logprobs(
            self.messages(item, question), choices, adapter=await served(self.adapter)
        )
        return normalized(logps)

    async def rationale(self, item: JudgedItem) -> str:
        completion = await self.lm.complete(
            self.messages(item, "In one sentence: is the reply right, and why?"),
            max_tokens=self.rationale_max_tokens,
            temperature=0.0,
            adapter=await served(self.adapter),
        )
        return completion.text.strip()


def normalized(logps: list[float]) -> list[float]:
    """Log-probabilities of a set of answers as probabilities that sum to 1 over it."""
    top = max(logps)
    if top == -math.inf:  # no answer has any weight: nothing to read
        raise ModelCallFailed("malformed", "every answer has probability 0")
    weights = [math.exp(lp - top) for lp in logps]
    return [w / sum(weights) for w in weights]


def _head(lm: LM, folder: str) -> RewardHead:
    """The head saved in `folder`, checked against the model it would read: features of
    another judge model mean nothing to it, and one read with notes needs them beside it."""
    head = RewardHead.load(folder)
    if why := not_applicable(lm, head):
        raise ValueError(f"The reward head in {folder} {why}: it is not applied.")
    if head.memory and ReviewedMemory.beside(folder) is None:
        raise ValueError(
            f"The reward head in {folder} reads {head.memory} reviewers' notes per exchange, "
            "but its folder holds no judge_memory.json"
        )
    return head
