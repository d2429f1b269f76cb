"""The night's judge gate: the new aligned judge against the one in use, then registered.

The judge in use is re-measured on tonight's held-out labels, with its own prompt and
stored threshold, so both judges' primary agreement statistic (kappa for pass/fail;
`judges.scaled_align.primary_metric`) comes from the same items. A judge in use on
another scale answers a different question: it is not compared, as if none were in
use. Every night's judge is registered (a failed one too: the record of why it was not
used), and only a passing one moves alias judge-production.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from flows.annotation_scale import describe
from flows.collect import Collected
from flows.judge_in_use import JudgeInUse, version_label
from flows.judge_versions import (
    JUDGE_PRODUCTION,
    StoredJudge,
    judge_tags,
    production_judge,
    register_judge,
)
from flows.runtime import Runtime
from flows.stages import JudgeStage, judge_splits
from judges.align import heldout_agreement
from judges.gate import GateDecision, InUseJudge, gate_judge
from judges.scaled_align import scaled_agreement
from judges.scales import ScoreScale
from judges.types import JudgedItem


@dataclass
class JudgeGate:
    decision: GateDecision
    registered: dict[str, int]  # tonight's judge: registered prompt name -> version
    judge: JudgeInUse  # what the rest of the night runs on
    previous: JudgeInUse | None  # the judge at judge-production before tonight, if any
    tags: dict[str, str] = field(default_factory=dict)  # as registered with tonight's judge

    @property
    def registered_label(self) -> str:
        return version_label(self.registered)


async def gate_judge_stage(
    rt: Runtime, run_id: str, judge: JudgeStage, collected: Collected
) -> JudgeGate:
    floor, seed = rt.settings.judge.min_kappa, rt.settings.agent_opt.seed
    previous, note = None, ""
    stored = production_judge(rt.registry, list(judge.prompts))
    if stored is not None and not same_scale(stored.scale, judge.scale):
        note = (
            f"; {version_label(stored.versions)} at {JUDGE_PRODUCTION} answers on a "
            f"{describe(stored.scale)} scale, not tonight's {describe(judge.scale)}, so it "
            "was not compared"
        )
        stored = None
    if stored is not None:
        _, _, heldout = judge_splits(rt, collected.items)
        report = await heldout_report(rt, stored, heldout, seed)
        previous = JudgeInUse(
            stored.prompts,
            stored.threshold,
            stored.versions,
            heldout_score=report.get(judge.primary, 0.0),
            floor=floor,
            is_new=False,
            scale=stored.scale,
        )
    in_use = InUseJudge(previous.label, previous.heldout_score) if previous else None
    decision = gate_judge(judge.heldout_score, floor, in_use, judge.primary)
    if note:
        decision = replace(decision, reason=decision.reason + note)
    tags = judge_tags(run_id, judge, collected.window, decision)
    registered = register_judge(rt.registry, run_id, judge.prompts, tags, decision.passed)
    new = JudgeInUse(
        judge.prompts,
        judge.threshold,
        registered,
        judge.heldout_score,
        floor,
        is_new=True,
        scale=judge.scale,
    )
    chosen = previous if decision.keeps_in_use and previous is not None else new
    return JudgeGate(decision, registered, chosen, previous, tags)


def same_scale(a: ScoreScale, b: ScoreScale) -> bool:
    """The same answers and order; the score's name aside (a version registered before
    scales were recorded has none)."""
    return replace(a, name=None) == replace(b, name=None)


async def heldout_report(
    rt: Runtime, stored: StoredJudge, items: list[JudgedItem], seed: int
) -> dict[str, float]:
    """The stored judge's agreement on `items`, measured the way it was aligned."""
    if stored.scale.kind == "boolean":
        return await heldout_agreement(rt.lm, stored.prompts, stored.threshold, items, seed)
    return await scaled_agreement(rt.lm, stored.prompts, stored.scale, items, seed)
