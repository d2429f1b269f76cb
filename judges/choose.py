"""The night's judge gate: tonight's aligned judge against the one in use, then registered.

The judge in use is re-measured on tonight's held-out labels, with its own prompt and
stored threshold, so both judges' primary agreement statistic comes from the same items.
A judge in use on another scale answers a different question: it is not compared, as if
none were in use. Every night's judge is registered (a failed one too: the record of why
it was not used), and only a passing one moves alias judge-production.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from infra.lm import LM
from infra.lm.adapter_base import servable_on, trained_on
from infra.registry.mlflow_registry import Registry
from infra.scales import ScoreScale
from judges.align import Alignment, fit_for
from judges.calls import Tally
from judges.gate import GateDecision, gate_judge
from judges.injection import InjectionCheck
from judges.judge import Judge, version_label
from judges.reward_head import RewardHead, not_applicable
from judges.types import JudgedItem, LabelWindow
from judges.versions import (
    ADAPTER_TAG,
    HEAD_TAG,
    JUDGE_PRODUCTION,
    judge_tags,
    log_judge_adapter,
    log_judge_head,
    production_judge,
    register_judge,
)
from judges.watch import Watch


@dataclass
class JudgeGate:
    decision: GateDecision
    registered: dict[str, int]  # tonight's judge: registered prompt name -> version
    judge: Judge  # what the rest of the night runs on
    previous: Judge | None  # the judge at judge-production before tonight, if any
    tags: dict[str, str] = field(default_factory=dict)  # as registered with tonight's judge
    watch: Watch | None = None  # the judge in use on the labels made since its version
    injection: InjectionCheck | None = None  # the night's judge against planted instructions

    @property
    def registered_label(self) -> str:
        return version_label(self.registered)

    @property
    def kept_previous(self) -> bool:
        """The night runs on the judge already in use, not tonight's."""
        return self.previous is not None and self.judge == self.previous

    @property
    def drifted(self) -> bool:
        """The night runs on the judge in use, and it agreed with people's recent labels
        less than it did when it was registered, by more than the setting allows."""
        return self.kept_previous and self.watch is not None and self.watch.dropped

    @property
    def trusted(self) -> bool:
        """Whether the judge the night runs on agrees with the humans enough to steer the
        agent: its held-out primary statistic reaches the gate's floor, on enough labels,
        it has not drifted from their recent labels, and it is not talked into passing."""
        agrees = self.judge.heldout_score >= self.decision.floor
        fooled = self.injection is not None and self.injection.fooled
        return self.decision.enough_labels and agrees and not self.drifted and not fooled


async def choose_judge(
    lm: LM,
    registry: Registry,
    run_id: str,
    alignment: Alignment,
    heldout: list[JudgedItem],
    window: LabelWindow,
    floor: float,
    seed: int,
    min_labels: int = 0,
    adapter_dir: Path | None = None,
    tally: Tally | None = None,
    criterion: str = "",
) -> JudgeGate:
    """Gate tonight's judge (rubric, and adapter or reward head if it has one) against the
    one in use on `heldout` (the items it was measured on), register it, and return the
    judge the night runs on; the one in use reads its adapter or head from under
    `adapter_dir`; `tally` counts its judge calls; `criterion`: a secondary criterion's
    judge, gated against that criterion's judge in use and registered under its names."""
    tonight = alignment.judge
    previous, note = None, ""
    stored = production_judge(registry, list(tonight.prompts), adapter_dir, criterion)
    if stored is not None and (why := not_comparable(lm, stored, tonight.scale)):
        note, stored = f"; {stored.label} at {JUDGE_PRODUCTION} {why}, so it was not compared", None
    if stored is not None and not heldout:  # nothing to measure it on: kept, unmeasured
        previous = stored
    elif stored is not None:
        report, verdicts = await fit_for(stored.scale).agreement(
            lm, stored.prompts, stored.threshold, heldout, seed, stored.adapter, stored.head, tally
        )
        previous = replace(stored, heldout=report, heldout_verdicts=verdicts)
    # tonight's judge learned something the one in use did not: a label newer than its own
    taught = previous is None or previous.made_at is None or window.last is None
    taught = taught or window.last > previous.made_at
    decision = gate_judge(
        tonight.heldout_score, floor, previous, tonight.primary, len(heldout), min_labels, taught
    )
    fallback = _untrusted_fallback(decision, alignment, previous)
    if fallback is not None:
        name, best = fallback
        among = "tonight's aligned judge, the seed rubric" + (
            " and the judge in use" if previous is not None else ""
        )
        note += (
            f"; no judge reaches the floor, so the night runs on {name}, the best of {among} "
            f"on tonight's held-out labels ({tonight.primary} {best.heldout_score:.2f}), "
            "marked untrusted"
        )
    if note:
        decision = replace(decision, reason=decision.reason + note)
    tags = judge_tags(run_id, alignment, window, decision)
    if tonight.adapter is not None:
        tags[ADAPTER_TAG] = log_judge_adapter(registry, run_id, tonight.adapter)
    if tonight.head is not None:
        tags[HEAD_TAG] = log_judge_head(registry, run_id, tonight.head)
    registered = register_judge(registry, run_id, tonight.prompts, tags, decision.passed, criterion)
    new = replace(tonight, versions=registered)
    chosen = previous if decision.keeps_in_use and previous is not None else new
    if fallback is not None and fallback[1] is not tonight:
        chosen = fallback[1]
    return JudgeGate(decision, registered, chosen, previous, tags)


def _untrusted_fallback(
    decision: GateDecision, alignment: Alignment, previous: Judge | None
) -> tuple[str, Judge] | None:
    """When no judge reaches the floor on enough held-out labels, the best of tonight's,
    the seed rubric and the one in use on those labels (ties: in that order), named for
    the report; None when the night has a judge it can trust (or too few labels to tell).
    Alignment can prefer a rubric that games its search metric (a restated meta-prompt
    did once) over a seed that agrees better on held-out labels."""
    if decision.passed or not decision.enough_labels:
        return None
    if previous is not None and previous.heldout_score >= decision.floor:
        return None
    options = [("tonight's aligned judge", alignment.judge), ("the seed rubric", alignment.seed)]
    if previous is not None:
        options.append((previous.label, previous))
    return max(options, key=lambda option: _comparable(option[1].heldout_score))


def _comparable(score: float) -> float:
    """An undefined statistic (NaN) ranks below any number."""
    return -math.inf if math.isnan(score) else score


def not_comparable(lm: LM, in_use: Judge, scale: ScoreScale) -> str:
    """Why the judge in use cannot be measured on tonight's labels ("" when it can): it
    answers on another scale, its adapter was trained on another base than tonight's
    judge model (a changed `judge_lm` cannot load it), or its reward head was read on
    another judge model (its features mean nothing to the head)."""
    if not same_scale(in_use.scale, scale):
        return f"answers on a {in_use.scale.describe()} scale, not tonight's {scale.describe()}"
    if in_use.adapter is not None and not servable_on(lm, in_use.adapter):
        return f"has an adapter trained on {trained_on(in_use.adapter)}, not tonight's judge model"
    if in_use.head is not None and (why := not_applicable(lm, RewardHead.load(in_use.head))):
        return f"has a reward head that {why}"
    return ""


def same_scale(a: ScoreScale, b: ScoreScale) -> bool:
    """The same answers and order; the score's name aside (a version registered before
    scales were recorded has none)."""
    return replace(a, name=None) == replace(b, name=None)
