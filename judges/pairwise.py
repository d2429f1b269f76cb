"""A pairwise judge: which of two answers is better, asked in both orders.

Small models prefer whichever answer is shown first (SmolLM2-135M's text says "A" 80-95%
of the time, see the shared data README), so every question is asked twice, the second
time with the answers swapped, and the two readings are averaged: a pure position bias
cancels out to 0.5. What a model leans towards the first answer is also taken off each
order's own reading: the position lean, the median over unlabelled pairs of half the
logit gap between the two orders (fitted once, like the threshold; "Calibrate Before Use",
Zhao et al. 2021, does the same for a prompt's own bias). Then either order alone gives
the verdict both give on most pairs, and the flip rate measures what position still
sways beyond a constant. As with the pointwise judge, the verdict comes from token
probabilities against a threshold calibrated on human labels; text verdicts exist to
measure how far a model's written answer can be trusted, and for rationales.
"""

from __future__ import annotations

import asyncio
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from infra.lm import LM
from judges.adapter import ServedJudgeAdapter, served
from judges.calibration import calibrate_threshold
from judges.types import PairwiseItem, Preference

SEED_PAIRWISE_PROMPTS = {
    "rubric": (
        "You compare two answers to a user's question. The better answer is the one that "
        "is correct, helpful and does what the question asks. Neither the length of an "
        "answer nor the order in which the answers are shown makes it better."
    ),
}
# The labels the model reads and says. "A"/"B" rather than "1"/"2": the only signal
# measured on the 135M model came from P("A") vs P("B"), and letters do not collide with
# numbers inside the answers (MT-Bench has many math questions).
LABELS = ("A", "B")
ASK_PROBABILITY = "Which answer is better? Answer A or B."
ASK_TEXT = "Which answer is better? Reply with the letter A or B, then one sentence why."
ASK_RATIONALE = "In one or two sentences: which answer is better, A or B, and why?"


@dataclass(frozen=True)
class PairwiseVerdict:
    """p_a is P(answer A is better): the mean over both orders of the model's normalized
    P(label of A) / (P("A") + P("B")). Equivalently p_a = 0.5 + d / 2, where d is the
    README's order-debiased score: P(first) in order 1 minus P(first) in order 2."""

    p_a: float
    p_a_by_order: tuple[float, float]  # (A shown first, B shown first), both as P(A better)
    order_flip: bool  # the two orders, each read at 0.5, pick different answers
    prefers: Preference

    def leaned(self, lean: float, threshold: float) -> PairwiseVerdict:
        """This verdict with `lean` more taken off each order (logits add), cut at
        `threshold`: a cache of verdicts read without a lean is re-read with one."""
        first, second = self.p_a_by_order
        return pairwise_verdict(first, 1.0 - second, lean, threshold)


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)  # a saturated order must not outweigh all the others
    return math.log(p / (1 - p))


def _unleaned(p_first: float, lean: float) -> float:
    """P(the answer shown first is better) with the lean taken off; exact when there is none."""
    return p_first if lean == 0 else 1 / (1 + math.exp(lean - _logit(p_first)))


def pairwise_verdict(
    p_first: float, p_first_swapped: float, lean: float, threshold: float
) -> PairwiseVerdict:
    """The verdict from each order's P(the answer shown first is better)."""
    by_order = (_unleaned(p_first, lean), 1.0 - _unleaned(p_first_swapped, lean))
    p_a = sum(by_order) / 2
    # Each order is read at 0.5, not at the threshold: the flip measures the position bias
    # left after the lean, and the threshold is calibrated for the average only.
    flip = (by_order[0] >= 0.5) != (by_order[1] >= 0.5)
    return PairwiseVerdict(p_a, by_order, flip, "A" if p_a >= threshold else "B")


def position_lean(verdicts: Sequence[PairwiseVerdict]) -> float:
    """The lean towards the answer shown first still in `verdicts`, in logits: the median
    of half the logit gap between the orders' P(A better). Needs no labels."""
    gaps = [(_logit(v.p_a_by_order[0]) - _logit(v.p_a_by_order[1])) / 2 for v in verdicts]
    return statistics.median(gaps) if gaps else 0.0


@dataclass(frozen=True)
class TextVerdict:
    """The model's written verdict in both orders, mapped back to the item's labels.

    Orders that disagree give "tie" (a position-driven answer is no preference); a reply
    in either order that names no answer gives "unparseable", never a default label."""

    prefers: Literal["A", "B", "tie", "unparseable"]
    by_order: tuple[Preference | None, Preference | None]
    texts: tuple[str, str]

    @property
    def order_flip(self) -> bool:
        return self.prefers == "tie"


# Tried in order; the first that matches names the verdict. Labels are matched in capitals
# only, so the article "a" is never read as a vote; a reply opening "A good point..." falls
# through to the later patterns.
_VERDICT_PATTERNS = [
    re.compile(r"^\W*(A|B)\W*$"),  # the letter alone: "B", "**A**."
    re.compile(r"^\W*(A|B)(?:[.:)*\n]| is better| wins)"),  # leads with it: "A. Because..."
    re.compile(
        r"(?i:verdict|winner|better answer is|better one is|prefer(?:red)?)"
        r"\W*(?:(?i:answer|response|output)\W*)?(A|B)\b"
    ),
]
_MENTION = re.compile(r"(?i:answer|response|output|assistant)\W{0,3}(A|B)\b")


def parse_choice(text: str) -> Preference | None:
    """The answer a written verdict names, or None when it names none or both."""
    text = text.strip()
    for pattern in _VERDICT_PATTERNS:
        if match := pattern.search(text):
            return "A" if match.group(1) == "A" else "B"
    mentioned = set(_MENTION.findall(text))
    if len(mentioned) != 1:
        return None
    return "A" if mentioned == {"A"} else "B"


def _swap(label: Preference | None) -> Preference | None:
    return None if label is None else ("B" if label == "A" else "A")


class PairwiseJudge:
    def __init__(
        self,
        lm: LM,
        prompts: dict[str, str],
        threshold: float = 0.5,
        rationale_max_tokens: int = 48,
        adapter: str | None = None,
        position_lean: float = 0.0,
    ):
        self.lm = lm
        self.prompts = prompts
        self.threshold = threshold  # a cut on p_a; fit it with fit_threshold
        self.position_lean = position_lean  # in logits; fit it with fit_position_lean
        self.rationale_max_tokens = rationale_max_tokens
        # the judge's own LoRA adapter (its folder), served beside the agent's
        self.adapter = ServedJudgeAdapter(lm, adapter) if adapter else None

    def messages(self, item: PairwiseItem, swapped: bool, ask: str) -> list[dict[str, str]]:
        """The shown labels follow the position: with `swapped`, answer B is shown as "A"."""
        first, second = (
            (item.answer_b, item.answer_a) if swapped else (item.answer_a, item.answer_b)
        )
        return [
            {"role": "system", "content": self.prompts["rubric"]},
            {
                "role": "user",
                "content": (
                    f"Question:\n{item.question}\n\nAnswer A:\n{first}\n\n"
                    f"Answer B:\n{second}\n\n{ask}"
                ),
            },
        ]

    async def _p_first(self, item: PairwiseItem, swapped: bool) -> float:
        logps = await self.lm.choice_logprobs(
            self.messages(item, swapped, ASK_PROBABILITY),
            list(LABELS),
            adapter=await served(self.adapter),
        )
        first, second = (math.exp(lp) for lp in logps)
        return first / (first + second) if first + second > 0 else 0.5

    async def verdict(self, item: PairwiseItem) -> PairwiseVerdict:
        p_first, p_first_swapped = await asyncio.gather(
            self._p_first(item, swapped=False), self._p_first(item, swapped=True)
        )
        return pairwise_verdict(p_first, p_first_swapped, self.position_lean, self.threshold)

    async def verdicts(self, items: list[PairwiseItem]) -> list[PairwiseVerdict]:
        return list(await asyncio.gather(*(self.verdict(item) for item in items)))

    async def fit_position_lean(self, items: list[PairwiseItem]) -> float:
        """The judge's lean towards the first answer on `items` (labels unused). Returned,
        not applied; fit it before the threshold, which is read on the leaned verdicts."""
        return self.position_lean + position_lean(await self.verdicts(items))

    async def fit_threshold(self, train: list[PairwiseItem]) -> float:
        """The cut on p_a that best agrees with the human labels of `train` (balanced over
        both labels). Returned, not applied: the caller decides which judge gets it."""
        labelled = [item for item in train if item.human_prefers is not None]
        verdicts = await self.verdicts(labelled)
        gold = [item.human_prefers == "A" for item in labelled]
        return calibrate_threshold([v.p_a for v in verdicts], gold)

    async def text_verdict(self, item: PairwiseItem) -> TextVerdict:
        adapter = await served(self.adapter)
        completions = await asyncio.gather(
            *(
                self.lm.complete(
                    self.messages(item, swapped, ASK_TEXT),
                    max_tokens=self.rationale_max_tokens,
                    temperature=0.0,
                    adapter=adapter,
                )
                for swapped in (False, True)
            )
        )
        texts = (completions[0].text, completions[1].text)
        by_order = (parse_choice(texts[0]), _swap(parse_choice(texts[1])))
        if by_order[0] is None or by_order[1] is None:
            return TextVerdict("unparseable", by_order, texts)
        return TextVerdict(by_order[0] if by_order[0] == by_order[1] else "tie", by_order, texts)

    async def rationale(self, item: PairwiseItem) -> str:
        """A short reason in the original order, for reflective feedback."""
        completion = await self.lm.complete(
            self.messages(item, swapped=False, ask=ASK_RATIONALE),
            max_tokens=self.rationale_max_tokens,
            temperature=0.0,
            adapter=await served(self.adapter),
        )
        return completion.text.strip()
