"""Aligning the pairwise judge's prompt to human preferences with gepa_opt.

The per-example score is the probability the judge (averaged over both orders) gives to
the answer the human preferred, weighted so both labels count equally: a judge that
always says "A" must not win on a sample where A is mostly preferred. Reflective
records show both orders and whether they flipped, since position bias is the small
model's main failure and the reflection has to see it to write against it.
"""

from __future__ import annotations

from gepa_opt import Adapter, EvaluationBatch
from infra.lm import LM
from judges.calibration import balancing_weights
from judges.calls import for_gepa
from judges.pairwise import PairwiseJudge, PairwiseVerdict
from judges.reflective import Record, reflective_dataset, their_comment
from judges.types import PairwiseItem, Preference


def preference_weights(items: list[PairwiseItem]) -> dict[Preference, float]:
    return balancing_weights((item.human_prefers for item in items), ("A", "B"))


def clip(text: str, max_chars: int) -> str:
    """Long answers cut short, so reflection prompts fit a small model's context."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]} [... {len(text) - max_chars} more characters]"


class PairwiseAlignmentAdapter(Adapter):
    def __init__(self, lm: LM, weights: dict[Preference, float], max_answer_chars: int = 600):
        self.lm = lm
        self.weights = weights
        self.max_answer_chars = max_answer_chars

    async def evaluate(
        self, batch: list[PairwiseItem], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        if unlabelled := [item.id for item in batch if item.human_prefers is None]:
            raise ValueError(f"pairwise alignment needs human labels; missing on {unlabelled}")
        verdicts = await for_gepa(PairwiseJudge(self.lm, candidate).verdicts(batch))
        scores = [
            self.weights[item.human_prefers] * (v.p_a if item.human_prefers == "A" else 1 - v.p_a)
            for item, v in zip(batch, verdicts, strict=True)
        ]
        trajectories = list(zip(batch, verdicts, strict=True)) if capture_traces else None
        return EvaluationBatch(outputs=verdicts, scores=scores, trajectories=trajectories)

    async def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch,
        components_to_update: list[str],
    ) -> dict[str, list[Record]]:
        judge = PairwiseJudge(self.lm, candidate)
        return await reflective_dataset(judge, eval_batch, components_to_update, self._record)

    def _record(self, item: PairwiseItem, v: PairwiseVerdict, reason: str) -> Record:
        first, swapped = v.p_a_by_order
        flip = (
            " The verdict flipped when the order was swapped: the judge followed the "
            "position, not the content."
            if v.order_flip
            else ""
        )
        return {
            "Inputs": (
                f"Question: {clip(item.question, self.max_answer_chars)}\n"
                f"Answer A: {clip(item.answer_a, self.max_answer_chars)}\n"
                f"Answer B: {clip(item.answer_b, self.max_answer_chars)}"
            ),
            "Generated Outputs": (
                f"Probability that A is better: {v.p_a:.2f} (A shown first: "
                f"{first:.2f}; B shown first: {swapped:.2f}).{flip} "
                f"The judge's reason: {reason}"
            ),
            "Feedback": (
                f"The human expert preferred answer {item.human_prefers}."
                f"{their_comment(item.human_comment)}"
            ),
        }
