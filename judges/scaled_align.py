"""Aligning a judge on any score scale (boolean, categorical, numeric) with gepa_opt.

The per-example score is how close the judge came to the human's value: for answers
read from probabilities, the probability of the human's answer, weighted so each
answer counts equally (a judge that always gives the majority answer must not win);
for numbers, one minus the error as a share of the range. An unparseable verdict (a
continuous scale is read from text) scores 0 and is counted, never given a default.
After the search the validation labels decide between the seed and GEPA's best on the
scale's primary agreement statistic, and agreement is reported on held-out labels only.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from gepa_opt import Adapter, EvaluationBatch, GEPAConfig, GEPAResult, optimize
from infra.lm import LM
from judges.calibration import balancing_weights
from judges.metrics import agreement_report
from judges.parsing import Unparseable
from judges.reflective import judge_reasons, their_comment
from judges.scaled import ScaledJudge, ScaledVerdict, answers
from judges.scales import ScoreScale
from judges.types import JudgedItem


def primary_metric(scale: ScoreScale) -> str:
    """The `agreement_report` key that decides between judges on this scale."""
    if scale.kind == "boolean" or (scale.kind == "categorical" and not scale.ordinal):
        return "kappa"
    if scale.levels is not None:  # ordinal categories, or a bounded integer range
        return "weighted_kappa"
    return "spearman"


def check_labels(items: list[JudgedItem], scale: ScoreScale) -> None:
    bad = [i.id for i in items if i.human_value is None or not scale.contains(i.human_value)]
    if bad:
        raise ValueError(
            f"scaled alignment needs a human_value on the {scale.kind} scale; "
            f"missing or off the scale on {bad}"
        )


def answer_of(value: bool | str) -> str:
    """The judge's answer that matches a human value (Yes/No for a boolean)."""
    if isinstance(value, bool):
        return "Yes" if value else "No"
    return value


def value_weights(items: list[JudgedItem], scale: ScoreScale) -> dict[Hashable, float]:
    """Balancing weights per answer; none for a numeric scale, scored by distance."""
    if scale.kind == "numeric":
        return {}
    return balancing_weights((answer_of(i.human_value) for i in items), answers(scale))


def closeness(error: float, scale: ScoreScale) -> float:
    """1 at the human's value, 0 a whole range away; 1 / (1 + error) with no range."""
    bounded = scale.minimum is not None and scale.maximum is not None
    span = scale.maximum - scale.minimum if bounded else 0.0
    return 1 - error / span if span else 1 / (1 + error)


def agreement_value(verdict: ScaledVerdict, scale: ScoreScale) -> bool | str | float:
    """The verdict as agreement metrics take it: a number on an integer scale goes to the
    nearest level, so exact match and weighted kappa apply (ties round up)."""
    if scale.kind == "numeric" and scale.levels is not None:
        return float(math.floor(verdict.value + 0.5))
    return verdict.value


def show(value: bool | str | float) -> str:
    if isinstance(value, bool | str):
        return answer_of(value)
    return f"{round(value, 2):g}"


class ScaledAlignmentAdapter(Adapter):
    def __init__(self, lm: LM, scale: ScoreScale, weights: dict[Hashable, float]):
        self.lm, self.scale, self.weights = lm, scale, weights
        self.unparseable = 0  # verdicts scored 0 because their text could not be read

    async def evaluate(
        self, batch: list[JudgedItem], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        check_labels(batch, self.scale)
        verdicts = await ScaledJudge(self.lm, candidate, self.scale).verdicts(batch)
        self.unparseable += sum(isinstance(v, Unparseable) for v in verdicts)
        scores = [self.score(item, v) for item, v in zip(batch, verdicts, strict=True)]
        trajectories = list(zip(batch, verdicts, strict=True)) if capture_traces else None
        return EvaluationBatch(outputs=verdicts, scores=scores, trajectories=trajectories)

    def score(self, item: JudgedItem, verdict: ScaledVerdict | Unparseable) -> float:
        if isinstance(verdict, Unparseable):
            return 0.0
        if self.scale.kind == "numeric":  # the expected value, or the parsed number
            return closeness(abs(verdict.value - item.human_value), self.scale)
        answer = answer_of(item.human_value)
        return self.weights[answer] * verdict.probabilities[answer]

    async def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch,
        components_to_update: list[str],
    ) -> dict[str, list[dict[str, Any]]]:
        records = []
        trajectories = eval_batch.trajectories or []
        judge = ScaledJudge(self.lm, candidate, self.scale)
        reasons = await judge_reasons(judge, trajectories)
        for (item, v), reason in zip(trajectories, reasons, strict=True):
            if isinstance(v, Unparseable):
                judged = f"unparseable: {v.reason}"
            else:
                top = sorted(v.probabilities.items(), key=lambda kv: -kv[1])[:3]
                probs = ", ".join(f"{answer} {p:.2f}" for answer, p in top)
                judged = show(v.value) + (f" (answer probabilities: {probs})" if probs else "")
            records.append(
                {
                    "Inputs": f"Request: {item.input_text}\nReply: {item.output_text}",
                    "Generated Outputs": f"{judged}. The judge's reason: {reason}",
                    "Feedback": (
                        f"The human reviewer's answer: {show(item.human_value)}."
                        f"{their_comment(item.human_comment)}"
                    ),
                }
            )
        return {component: records for component in components_to_update}


async def scaled_agreement(
    lm: LM, prompts: dict[str, str], scale: ScoreScale, items: list[JudgedItem], seed: int
) -> dict[str, float]:
    """`agreement_report` over the verdicts that could be read, plus how many could not
    ("unparseable"): counting a missing verdict as any value would bias agreement."""
    verdicts = await ScaledJudge(lm, prompts, scale).verdicts(items)
    pairs = [
        (agreement_value(v, scale), item.human_value)
        for item, v in zip(items, verdicts, strict=True)
        if not isinstance(v, Unparseable)
    ]
    report = {"n": 0.0}
    if pairs:
        pred, gold = zip(*pairs, strict=True)
        report = agreement_report(pred, gold, seed, scale=scale)
    return report | {"unparseable": float(len(items) - len(pairs))}


def beats(score: float, other: float) -> bool:
    """A NaN (undefined or missing) statistic never wins, and loses to any number."""
    return not math.isnan(score) and (math.isnan(other) or score > other)


@dataclass
class AlignedScaledJudge:
    prompts: dict[str, str]  # the judge to use: GEPA's best, or the seed if that did not win
    scale: ScoreScale
    primary: str  # the agreement statistic that chose: an `agreement_report` key
    heldout: dict[str, float]  # scaled_agreement on held-out labels
    seed_heldout: dict[str, float]
    val_score: float  # `primary` on the validation labels (NaN when undefined)
    seed_val_score: float
    kept_seed: bool
    metric_calls: int
    unparseable: int  # verdicts GEPA scored 0 during the search
    result: GEPAResult | None = field(default=None, repr=False)


async def align_scaled_judge(
    lm: LM,
    seed_prompts: dict[str, str],
    scale: ScoreScale,
    train: list[JudgedItem],
    val: list[JudgedItem],
    heldout: list[JudgedItem],
    config: GEPAConfig,
    reflection_lm: Callable[[str], Awaitable[str]],
    on_event: Callable[[Any], None] | None = None,
) -> AlignedScaledJudge:
    """GEPA on the judge prompt (train = feedback, val = Pareto set); GEPA's best must then
    beat the seed on `primary_metric(scale)` over the val labels, or the seed stays, since
    the search metric is only a surrogate. Held-out labels are only reported.

    A boolean verdict here is P("Yes") >= 0.5, with no threshold fitted: the production
    path for pass/fail judges is `judges.align.align_judge`, which calibrates one."""
    check_labels(train + val + heldout, scale)  # before any budget is spent
    adapter = ScaledAlignmentAdapter(lm, scale, value_weights(train + val, scale))
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
    best, primary = result.best_candidate, primary_metric(scale)
    seed_val, best_val = await asyncio.gather(
        scaled_agreement(lm, seed_prompts, scale, val, config.seed),
        scaled_agreement(lm, best, scale, val, config.seed),
    )
    seed_score, best_score = (r.get(primary, math.nan) for r in (seed_val, best_val))
    kept_seed = best != seed_prompts and not beats(best_score, seed_score)
    chosen = seed_prompts if kept_seed else best
    seed_report, chosen_report = await asyncio.gather(
        scaled_agreement(lm, seed_prompts, scale, heldout, config.seed),
        scaled_agreement(lm, chosen, scale, heldout, config.seed),
    )
    return AlignedScaledJudge(
        prompts=dict(chosen),
        scale=scale,
        primary=primary,
        heldout=chosen_report,
        seed_heldout=seed_report,
        val_score=best_score,
        seed_val_score=seed_score,
        kept_seed=kept_seed,
        metric_calls=result.metric_calls_used,
        unparseable=adapter.unparseable,
        result=result,
    )
