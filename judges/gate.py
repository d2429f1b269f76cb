"""The gate a new judge version passes before it may score agent candidates.

A judge that agrees with the humans less than the floor, or less than the judge already
in use on the same held-out labels, would steer the agent worse than what runs today.
Agreement is the scale's primary statistic (`judges.agreement.primary_metric`: kappa
for pass/fail), and both judges' must come from tonight's held-out split: a statistic
measured on another night's labels is not comparable. Too few held-out labels make any
statistic a coin toss (kappa on 5 labels swings by +-0.5), so below a minimum count the
gate cannot pass, and no judge measured on them is trusted.
"""

from __future__ import annotations

from dataclasses import dataclass

from judges.judge import Judge


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    reason: str  # one sentence for the night's report
    new_score: float  # the new judge's primary agreement statistic
    floor: float
    in_use: Judge | None = None  # at judge-production, re-measured on tonight's labels
    labels: int | None = None  # held-out labels behind the statistics (None: not counted)
    min_labels: int = 0

    @property
    def enough_labels(self) -> bool:
        """No label at all is never enough, whatever the setting: nothing was measured."""
        return self.labels is None or (self.labels > 0 and self.labels >= self.min_labels)

    @property
    def keeps_in_use(self) -> bool:
        """The rest of the night runs on the judge already in use."""
        return not self.passed and self.in_use is not None


def gate_judge(
    new_score: float,
    floor: float,
    in_use: Judge | None,
    metric: str = "kappa",
    labels: int | None = None,
    min_labels: int = 0,
    taught: bool = True,
) -> GateDecision:
    """Pass when at least `min_labels` held-out labels were measured, the new judge's
    held-out `metric` reaches `floor` and is not below the in-use judge's on the same
    items; a tie passes when `taught` (it learned from labels newer than the in-use
    judge's), and keeps the judge in use when not: a quiet night's judge is the same one
    again, and production's judge does not change for nothing."""
    new = f"new judge {metric} {new_score:.2f}"
    used = in_use.heldout_score if in_use else None
    if labels is not None and (labels < min_labels or labels == 0):
        kept = f"kept {in_use.label}" if in_use else "the night runs on it, marked untrusted"
        measured = f"{new} on only {labels}" if labels else "the new judge measured on no"
        reason = (
            f"{measured} held-out labels (the gate needs "
            f"judge.min_heldout_labels = {min_labels}); {kept}"
        )
        return GateDecision(False, reason, new_score, floor, in_use, labels, min_labels)
    # `not >=` rather than `<`, so that a NaN statistic fails instead of slipping through.
    if not new_score >= floor:
        if in_use is None:  # what the night runs on then is `judges.choose`'s to say
            reason = f"{new} < floor {floor:.2f} and no judge is in use"
        else:
            reason = f"{new} < floor {floor:.2f}; kept {in_use.label} ({metric} {used:.2f})"
        return GateDecision(False, reason, new_score, floor, in_use, labels, min_labels)
    if in_use is None:
        reason = f"{new} >= floor {floor:.2f}, no judge in use yet; it becomes judge-production"
        return GateDecision(True, reason, new_score, floor, None, labels, min_labels)
    if not new_score >= used:
        reason = (
            f"{new} < {in_use.label}'s {used:.2f} on tonight's held-out labels; kept {in_use.label}"
        )
        return GateDecision(False, reason, new_score, floor, in_use, labels, min_labels)
    if new_score == used and not taught:
        reason = (
            f"{new} ties {in_use.label}'s {used:.2f} on tonight's held-out labels, with no "
            f"label newer than those {in_use.label} learned from; kept {in_use.label}"
        )
        return GateDecision(False, reason, new_score, floor, in_use, labels, min_labels)
    reason = (
        f"{new} >= floor {floor:.2f} and >= {in_use.label}'s {used:.2f} on tonight's "
        f"held-out labels; it replaces {in_use.label}"
    )
    return GateDecision(True, reason, new_score, floor, in_use, labels, min_labels)
