"""Aligning the judge's prompt to the humans with gepa_opt.

The per-example metric is the probability the judge gives to the human's label,
weighted so both labels count equally (a judge that always says "fail" must not win
on a mostly-failing sample). The reflection sees the human's label and comment beside
the judge's verdict and its one-sentence reason. After the search, the pass threshold is
calibrated on the training annotations, the validation labels decide between the seed
and GEPA's best, and agreement is measured on held-out labels only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gepa_opt import Adapter, EvaluationBatch, GEPAConfig, GEPAResult, optimize
from infra.lm import LM
from judges.calibration import balancing_weights, calibrate_threshold
from judges.metrics import agreement_report, cohen_kappa
from judges.pointwise import PointwiseJudge
from judges.reflective import judge_reasons, their_comment
from judges.types import JudgedItem


def label_weights(items: list[JudgedItem]) -> dict[bool, float]:
    return balancing_weights((item.human_pass for item in items), (True, False))


class JudgeAlignmentAdapter(Adapter):
    def __init__(self, lm: LM, weights: dict[bool, float]):
        self.lm = lm
        self.weights = weights

    async def evaluate(
        self, batch: list[JudgedItem], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        judge = PointwiseJudge(self.lm, candidate)
        probs = await asyncio.gather(*(judge.p_pass(item) for item in batch))
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
    ) -> dict[str, list[dict[str, Any]]]:
        records = []
        trajectories = eval_batch.trajectories or []
        judge = PointwiseJudge(self.lm, candidate)
        reasons = await judge_reasons(judge, trajectories)
        for (item, p), reason in zip(trajectories, reasons, strict=True):
            human = "pass" if item.human_pass else "fail"
            judged = "pass" if p >= 0.5 else "fail"
            records.append(
                {
                    "Inputs": f"Request: {item.input_text}\nReply: {item.output_text}",
                    "Generated Outputs": (
                        f"{judged} (probability of pass {p:.2f}). The judge's reason: {reason}"
                    ),
                    "Feedback": (
                        f"The human reviewer marked this reply {human}."
                        f"{their_comment(item.human_comment)}"
                    ),
                }
            )
        return {component: records for component in components_to_update}


@dataclass
class AlignedJudge:
    prompts: dict[
        str, str
    ]  # the judge to use: GEPA's best, or the seed if that did not agree better
    threshold: float
    heldout: dict[str, float]  # agreement_report on held-out labels
    seed_heldout: dict[str, float]
    seed_threshold: float
    val_kappa: float  # what chose between the two: kappa on the validation labels
    seed_val_kappa: float
    kept_seed: bool
    metric_calls: int
    result: GEPAResult | None = field(default=None, repr=False)


def _labels(items: list[JudgedItem]) -> list[bool]:
    return [bool(i.human_pass) for i in items]


async def fit_and_validate(
    lm: LM, prompts: dict[str, str], train: list[JudgedItem], val: list[JudgedItem]
) -> tuple[float, float]:
    """(threshold calibrated on train, kappa on val at that threshold)."""
    probs = await PointwiseJudge(lm, prompts).p_pass_many(train + val)
    threshold = calibrate_threshold(probs[: len(train)], _labels(train))
    verdicts = [p >= threshold for p in probs[len(train) :]]
    return threshold, cohen_kappa(verdicts, _labels(val))


async def heldout_agreement(
    lm: LM, prompts: dict[str, str], threshold: float, items: list[JudgedItem], seed: int
) -> dict[str, float]:
    probs = await PointwiseJudge(lm, prompts).p_pass_many(items)
    return agreement_report([p >= threshold for p in probs], _labels(items), seed)


async def align_judge(
    lm: LM,
    seed_prompts: dict[str, str],
    train: list[JudgedItem],
    val: list[JudgedItem],
    heldout: list[JudgedItem],
    config: GEPAConfig,
    reflection_lm: Callable[[str], Awaitable[str]],
    on_event: Callable[[Any], None] | None = None,
) -> AlignedJudge:
    """GEPA on the judge prompt (train = feedback, val = Pareto set). GEPA's best must then
    beat the seed on val kappa with a threshold fitted on train, or the seed stays: the
    search metric is only a surrogate, and a small reflection model can propose rubrics
    that game it. Held-out labels are only ever reported, never used to choose."""
    adapter = JudgeAlignmentAdapter(lm, label_weights(train + val))
    result = await optimize(
        seed_prompts,
        train,
        val,
        adapter,
        reflection_lm,
        config,
        example_id=lambda item: item.id,
        on_event=on_event,
    )
    best = result.best_candidate
    (seed_threshold, seed_kappa), (best_threshold, best_kappa) = await asyncio.gather(
        fit_and_validate(lm, seed_prompts, train, val), fit_and_validate(lm, best, train, val)
    )
    kept_seed = best != seed_prompts and best_kappa <= seed_kappa  # GEPA found one; it lost
    chosen, threshold = (seed_prompts, seed_threshold) if kept_seed else (best, best_threshold)
    seed_report, chosen_report = await asyncio.gather(
        heldout_agreement(lm, seed_prompts, seed_threshold, heldout, config.seed),
        heldout_agreement(lm, chosen, threshold, heldout, config.seed),
    )
    return AlignedJudge(
        prompts=dict(chosen),
        threshold=threshold,
        heldout=chosen_report,
        seed_heldout=seed_report,
        seed_threshold=seed_threshold,
        val_kappa=best_kappa,
        seed_val_kappa=seed_kappa,
        kept_seed=kept_seed,
        metric_calls=result.metric_calls_used,
        result=result,
    )
