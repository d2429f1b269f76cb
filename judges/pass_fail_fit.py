"""Aligning a pass/fail judge (`judges.align`'s strategy for a boolean scale).

The per-example metric is the probability the judge gives to the human's label,
weighted so both labels count equally (a judge that always says "fail" must not win
on a mostly-failing sample). The reflection sees the human's label and comment beside
the judge's verdict and its one-sentence reason. A rubric is fitted by calibrating its
pass threshold on P(pass) over the training labels, and measured by Cohen's kappa.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gepa_opt import Adapter, EvaluationBatch
from infra.lm import LM
from judges.agreement import agreement_report
from judges.calibration import balancing_weights, calibrate_threshold
from judges.calls import Tally, answered, for_gepa, tallied
from judges.metrics import cohen_kappa
from judges.pointwise import PointwiseJudge
from judges.reflective import Record, reflective_dataset, their_comment
from judges.types import HeldoutVerdict, JudgedItem


def label_weights(items: list[JudgedItem]) -> dict[bool, float]:
    return balancing_weights((item.human_pass for item in items), (True, False))


class JudgeAlignmentAdapter(Adapter):
    def __init__(self, lm: LM, weights: dict[bool, float]):
        self.lm = lm
        self.weights = weights
        self.unparseable = 0  # P(pass) is always readable

    async def evaluate(
        self, batch: list[JudgedItem], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        judge = PointwiseJudge(self.lm, candidate)
        probs = await asyncio.gather(*(for_gepa(judge.p_pass(item)) for item in batch))
        scores = [
            self.weights[item.human_pass] * (p if item.human_pass else 1 - p)
            for item, p in zip(batch, probs, strict=True)
        ]
        trajectories = list(zip(batch, probs, strict=True)) if capture_traces else None
        return EvaluationBatch(outputs=list(probs), scores=scores, trajectories=trajectories)

    async def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch,
        components_to_update: list[str],
    ) -> dict[str, list[Record]]:
        judge = PointwiseJudge(self.lm, candidate)
        return await reflective_dataset(judge, eval_batch, components_to_update, self._record)

    def _record(self, item: JudgedItem, p: float, reason: str) -> Record:
        human = "pass" if item.human_pass else "fail"
        judged = "pass" if p >= 0.5 else "fail"
        return {
            "Inputs": f"Request: {item.input_text}\nReply: {item.output_text}",
            "Generated Outputs": (
                f"{judged} (probability of pass {p:.2f}). The judge's reason: {reason}"
            ),
            "Feedback": (
                f"The human reviewer marked this reply {human}.{their_comment(item.human_comment)}"
            ),
        }


def check_labels(items: list[JudgedItem]) -> None:
    bad = [i.id for i in items if i.human_pass is None]
    if bad:
        raise ValueError(f"pass/fail alignment needs a human pass or fail; missing on {bad}")


def _labels(items: list[JudgedItem]) -> list[bool]:
    return [bool(i.human_pass) for i in items]


async def fit_and_validate(
    lm: LM,
    prompts: dict[str, str],
    train: list[JudgedItem],
    val: list[JudgedItem],
    adapter: str | None = None,
    cut_on_val_too: bool = False,
) -> tuple[float, float]:
    """(threshold calibrated on train, kappa on val at that threshold), over the items
    whose judging call succeeded; with the judge's LoRA `adapter` (its folder).
    `cut_on_val_too`: calibrate on the training and validation labels together, for a
    judge fitted on the training labels (on those alone its P(pass) sits near 0 and 1,
    and the cut lands anywhere in between)."""
    probs = await PointwiseJudge(lm, prompts, adapter=adapter).p_pass_many(train + val)
    train, train_probs = answered(train, probs[: len(train)])
    val, val_probs = answered(val, probs[len(train) :])
    return validated_cut(train_probs, _labels(train), val_probs, _labels(val), cut_on_val_too)


def validated_cut(
    train_probs: list[float],
    train_gold: list[bool],
    val_probs: list[float],
    val_gold: list[bool],
    cut_on_val_too: bool = False,
) -> tuple[float, float]:
    """`fit_and_validate` on P(pass) already read: (threshold, kappa on val at it)."""
    fitted, gold = train_probs, train_gold
    if cut_on_val_too:
        fitted, gold = fitted + val_probs, gold + val_gold
    threshold = calibrate_threshold(fitted, gold)
    return threshold, cohen_kappa([p >= threshold for p in val_probs], val_gold)


async def heldout_agreement(
    lm: LM,
    prompts: dict[str, str],
    threshold: float,
    items: list[JudgedItem],
    seed: int,
    adapter: str | None = None,
    head: str | None = None,
    tally: Tally | None = None,
) -> tuple[dict[str, float], tuple[HeldoutVerdict, ...]]:
    """Agreement over the items whose judging call succeeded; "failed" counts the rest;
    read with the judge's LoRA `adapter` or reward `head` (folders) if it has one. With
    it, each judged item's label beside the judge's P(pass) and verdict at `threshold`."""
    judge = PointwiseJudge(lm, prompts, adapter=adapter, head=head)
    judged, probs = answered(items, await tallied(items, judge.p_pass_many, tally))
    verdicts = [p >= threshold for p in probs]
    report = agreement_report(verdicts, _labels(judged), seed)
    pairs = tuple(
        HeldoutVerdict(item.id, bool(item.human_pass), said, p, float(bool(item.human_pass)))
        for item, p, said in zip(judged, probs, verdicts, strict=True)
    )
    return report | {"failed": float(len(items) - len(judged))}, pairs


@dataclass(frozen=True)
class PassFailFit:
    """A judge read as P(pass) against a threshold calibrated on the training labels."""

    primary: str = "kappa"

    def check(self, items: list[JudgedItem]) -> None:
        check_labels(items)

    def adapter(self, lm: LM, labelled: list[JudgedItem]) -> JudgeAlignmentAdapter:
        return JudgeAlignmentAdapter(lm, label_weights(labelled))

    async def fit(
        self,
        lm: LM,
        prompts: dict[str, str],
        train: list[JudgedItem],
        val: list[JudgedItem],
        seed: int,
    ) -> tuple[float, float]:
        return await fit_and_validate(lm, prompts, train, val)

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
        return await heldout_agreement(lm, prompts, threshold, items, seed, adapter, head, tally)
