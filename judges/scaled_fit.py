"""Aligning a judge that answers on the humans' own scale (`judges.align`'s strategy
for a categorical or numeric scale; it also takes a boolean one, read at P(yes) >= 0.5).

The per-example score is how close the judge came to the human's value, as the scale's
kind credits it (`judges.kinds`): for answers read from probabilities, the probability
of the human's answer, weighted so each answer counts equally (a judge that always gives
the majority answer must not win); for numbers, one minus the error as a share of the
range. An unparseable verdict (a continuous scale is read from text) scores 0 and is
counted, never given a default. A rubric is fitted as it is (no threshold) and measured
by the scale's primary agreement statistic (`judges.agreement.primary_metric`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

from gepa_opt import Adapter, CallFailed, EvaluationBatch
from infra.lm import LM
from infra.scales import ScoreScale
from judges.agreement import agreement_report, primary_metric
from judges.calls import Tally, tallied
from judges.kinds import PASS_CUT, kind_of
from judges.parsing import Unparseable
from judges.reflective import Record, reflective_dataset, their_comment
from judges.scaled import ScaledJudge, ScaledVerdict
from judges.scaled_metric import placed_score
from judges.types import HeldoutVerdict, JudgedItem


def check_labels(items: list[JudgedItem], scale: ScoreScale) -> None:
    bad = [i.id for i in items if i.human_value is None or not scale.contains(i.human_value)]
    if bad:
        raise ValueError(
            f"scaled alignment needs a human_value on the {scale.kind} scale; "
            f"missing or off the scale on {bad}"
        )


def value_weights(items: list[JudgedItem], scale: ScoreScale) -> dict[Hashable, float]:
    """Balancing weights per answer; none for a numeric scale, scored by distance."""
    return kind_of(scale).weights(i.human_value for i in items)


def agreement_value(verdict: ScaledVerdict, scale: ScoreScale) -> bool | str | float:
    """The verdict as agreement metrics take it: a number on an integer scale goes to the
    nearest level, so exact match and weighted kappa apply (ties round up)."""
    return kind_of(scale).agreement_value(verdict.value)


class ScaledAlignmentAdapter(Adapter):
    def __init__(self, lm: LM, scale: ScoreScale, weights: dict[Hashable, float]):
        self.lm, self.scale, self.weights = lm, scale, weights
        self.kind = kind_of(scale)
        self.unparseable = 0  # verdicts scored 0 because their text could not be read

    async def evaluate(
        self, batch: list[JudgedItem], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        check_labels(batch, self.scale)
        verdicts = await ScaledJudge(self.lm, candidate, self.scale).verdicts(batch)
        if None in verdicts:
            raise CallFailed(f"the judge's call failed on {[i.id for i in batch]}")
        self.unparseable += sum(isinstance(v, Unparseable) for v in verdicts)
        scores = [self.score(item, v) for item, v in zip(batch, verdicts, strict=True)]
        trajectories = list(zip(batch, verdicts, strict=True)) if capture_traces else None
        return EvaluationBatch(outputs=verdicts, scores=scores, trajectories=trajectories)

    def score(self, item: JudgedItem, verdict: ScaledVerdict | Unparseable) -> float:
        if isinstance(verdict, Unparseable):
            return 0.0
        return self.kind.credit(
            verdict.value, verdict.probabilities, item.human_value, self.weights
        )

    async def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch,
        components_to_update: list[str],
    ) -> dict[str, list[Record]]:
        judge = ScaledJudge(self.lm, candidate, self.scale)
        return await reflective_dataset(judge, eval_batch, components_to_update, self._record)

    def _record(self, item: JudgedItem, v: ScaledVerdict | Unparseable, reason: str) -> Record:
        if isinstance(v, Unparseable):
            judged = f"unparseable: {v.reason}"
        else:
            top = sorted(v.probabilities.items(), key=lambda kv: -kv[1])[:3]
            probs = ", ".join(f"{answer} {p:.2f}" for answer, p in top)
            judged = self.kind.show(v.value) + (
                f" (answer probabilities: {probs})" if probs else ""
            )
        return {
            "Inputs": f"Request: {item.input_text}\nReply: {item.output_text}",
            "Generated Outputs": f"{judged}. The judge's reason: {reason}",
            "Feedback": (
                f"The human reviewer's answer: {self.kind.show(item.human_value)}."
                f"{their_comment(item.human_comment)}"
            ),
        }


async def scaled_agreement(
    lm: LM,
    prompts: dict[str, str],
    scale: ScoreScale,
    items: list[JudgedItem],
    seed: int,
    tally: Tally | None = None,
) -> tuple[dict[str, float], tuple[HeldoutVerdict, ...]]:
    """`agreement_report` over the verdicts that could be read, plus how many could not
    ("unparseable") and whose call failed ("failed"): counting a missing verdict as any
    value would bias agreement. With it, each read verdict beside its item's label."""
    verdicts = await tallied(items, ScaledJudge(lm, prompts, scale).verdicts, tally)
    pairs = tuple(
        HeldoutVerdict(
            item.id,
            item.human_value,
            agreement_value(v, scale),
            placed_score(scale, v.value, v.probabilities),
            placed_score(scale, item.human_value, {}),
        )
        for item, v in zip(items, verdicts, strict=True)
        if v is not None and not isinstance(v, Unparseable)
    )
    failed = verdicts.count(None)
    report = {"n": 0.0}
    if pairs:
        pred, gold = [p.judged for p in pairs], [p.human for p in pairs]
        report = agreement_report(pred, gold, seed, scale=scale)
    unparseable = len(items) - len(pairs) - failed
    return report | {"unparseable": float(unparseable), "failed": float(failed)}, pairs


@dataclass(frozen=True)
class ScaledFit:
    """A judge whose verdict is an answer on `scale`, with no threshold to fit."""

    scale: ScoreScale

    @property
    def primary(self) -> str:
        return primary_metric(self.scale)

    def check(self, items: list[JudgedItem]) -> None:
        check_labels(items, self.scale)

    def adapter(self, lm: LM, labelled: list[JudgedItem]) -> ScaledAlignmentAdapter:
        return ScaledAlignmentAdapter(lm, self.scale, value_weights(labelled, self.scale))

    async def fit(
        self,
        lm: LM,
        prompts: dict[str, str],
        train: list[JudgedItem],
        val: list[JudgedItem],
        seed: int,
    ) -> tuple[float, float]:
        """(PASS_CUT, the primary statistic on val; NaN when undefined there)."""
        report, _ = await scaled_agreement(lm, prompts, self.scale, val, seed)
        return PASS_CUT, report.get(self.primary, math.nan)

    async def agreement(
        self,
        lm: LM,
        prompts: dict[str, str],
        threshold: float,
        items: list[JudgedItem],
        seed: int,
        adapter: str | None = None,
        head: str | None = None,
        tally: Tally | None = None,
    ) -> tuple[dict[str, float], tuple[HeldoutVerdict, ...]]:
        if adapter is not None:  # `judges.judge_lora` trains pass/fail judges only
            raise ValueError(f"a judge on a {self.scale.describe()} scale has no LoRA adapter")
        if head is not None:  # `judges.judge_head` fits pass/fail judges only
            raise ValueError(f"a judge on a {self.scale.describe()} scale has no reward head")
        return await scaled_agreement(lm, prompts, self.scale, items, seed, tally)
