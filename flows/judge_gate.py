"""The night's judge gate: the new aligned judge against the one in use, then registered.

The judge in use is re-measured on tonight's held-out labels, with its own prompt and
stored threshold, so both kappas come from the same items. Every night's judge is
registered (a failed one too: the record of why it was not used), and only a passing
one moves alias judge-production.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flows.collect import Collected
from flows.judge_in_use import JudgeInUse
from flows.judge_versions import judge_tags, production_judge, register_judge
from flows.runtime import Runtime
from flows.stages import JudgeStage, judge_splits
from judges.align import heldout_agreement
from judges.gate import GateDecision, InUseJudge, gate_judge


@dataclass
class JudgeGate:
    decision: GateDecision
    registered: dict[str, int]  # tonight's judge: registered prompt name -> version
    judge: JudgeInUse  # what the rest of the night runs on
    previous: JudgeInUse | None  # the judge at judge-production before tonight, if any
    tags: dict[str, str] = field(default_factory=dict)  # as registered with tonight's judge

    @property
    def registered_label(self) -> str:
        return ", ".join(f"{name} v{v}" for name, v in sorted(self.registered.items()))


async def gate_judge_stage(
    rt: Runtime, run_id: str, judge: JudgeStage, collected: Collected
) -> JudgeGate:
    floor, seed = rt.settings.judge.min_kappa, rt.settings.agent_opt.seed
    previous = None
    stored = production_judge(rt.registry, list(judge.prompts))
    if stored is not None:
        _, _, heldout = judge_splits(rt, collected.items)
        report = await heldout_agreement(rt.lm, stored.prompts, stored.threshold, heldout, seed)
        previous = JudgeInUse(
            stored.prompts,
            stored.threshold,
            stored.versions,
            heldout_kappa=report.get("kappa", 0.0),
            min_kappa=floor,
            is_new=False,
        )
    new_kappa = judge.heldout.get("kappa", 0.0)
    decision = gate_judge(
        new_kappa, floor, InUseJudge(previous.label, previous.heldout_kappa) if previous else None
    )
    tags = judge_tags(run_id, judge, collected.window, decision)
    registered = register_judge(rt.registry, run_id, judge.prompts, tags, decision.passed)
    new = JudgeInUse(judge.prompts, judge.threshold, registered, new_kappa, floor, is_new=True)
    chosen = previous if decision.keeps_in_use and previous is not None else new
    return JudgeGate(decision, registered, chosen, previous, tags)
