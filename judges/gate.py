"""The gate a new judge version passes before it may score agent candidates.

A judge that agrees with the humans less than the floor, or less than the judge already
in use on the same held-out labels, would steer the agent worse than what runs today.
Both kappas must come from tonight's held-out split: a kappa measured on another
night's labels is not comparable.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InUseJudge:
    """The judge at alias judge-production, re-measured on tonight's held-out labels."""

    label: str  # how people name it, e.g. "agent-judge-rubric v3"
    kappa: float


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    reason: str  # one sentence for the night's report
    new_kappa: float
    floor: float
    in_use: InUseJudge | None = None

    @property
    def keeps_in_use(self) -> bool:
        """The rest of the night runs on the judge already in use."""
        return not self.passed and self.in_use is not None


def gate_judge(new_kappa: float, floor: float, in_use: InUseJudge | None) -> GateDecision:
    """Pass when the new judge's held-out kappa reaches `floor` and is not below the in-use
    judge's kappa on the same items (a tie passes: the newer labels taught it)."""
    new = f"new judge kappa {new_kappa:.2f}"
    # `not >=` rather than `<`, so that a NaN kappa fails instead of slipping through.
    if not new_kappa >= floor:
        if in_use is None:
            reason = (
                f"{new} < floor {floor:.2f} and no judge is in use; the night runs on it, "
                "marked untrusted"
            )
        else:
            reason = f"{new} < floor {floor:.2f}; kept {in_use.label} (kappa {in_use.kappa:.2f})"
        return GateDecision(False, reason, new_kappa, floor, in_use)
    if in_use is None:
        reason = f"{new} >= floor {floor:.2f}, no judge in use yet; it becomes judge-production"
        return GateDecision(True, reason, new_kappa, floor, None)
    if not new_kappa >= in_use.kappa:
        reason = (
            f"{new} < {in_use.label}'s {in_use.kappa:.2f} on tonight's held-out labels; "
            f"kept {in_use.label}"
        )
        return GateDecision(False, reason, new_kappa, floor, in_use)
    reason = (
        f"{new} >= floor {floor:.2f} and >= {in_use.label}'s {in_use.kappa:.2f} on tonight's "
        f"held-out labels; it replaces {in_use.label}"
    )
    return GateDecision(True, reason, new_kappa, floor, in_use)
