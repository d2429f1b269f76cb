"""The gate a version passes before it may go to production: on the held-out examples,
it beats the version in production, no slice of them falls, its measure is trusted, and
it passes every must-pass case (`flows.production.must_pass`). Where no true label scored
the examples, `promotion.pairwise` also compares the two versions' replies side by side
(`judges.pairwise_gate`): the candidate's win rate must lie above 0.5, from a judge the
order of the replies does not sway too often.

Both versions are scored on the same examples in the same night, so the comparison is
paired: the interval is a bootstrap over examples of the mean gain, and it must exclude
zero, so one lucky example cannot promote. A slice (the agent's intent, tag or prompt:
`Example.metadata["slice"]`, else its reference) with fewer than `min_slice_size`
examples is too noisy to hold a version back, and is not checked. Each secondary
criterion (`traces.criteria`) must not fall beyond its tolerance
(`flows.production.criteria_gate`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import fmean

from flows.production.criteria_gate import CriterionEvidence, CriterionVerdict, criterion_verdicts
from flows.production.must_pass import CaseResult
from infra.settings import PromotionSettings
from judges.metrics import Estimate, bootstrap
from judges.pairwise_gate import PairwiseEvidence


@dataclass(frozen=True)
class Evidence:
    """A candidate against the version in production, on one night's held-out examples."""

    candidate: dict[str, float]  # example id -> score (true-label score, else the judge's)
    production: dict[str, float]  # the same ids, the version in production
    slices: dict[str, str] = field(default_factory=dict)  # example id -> slice
    by_labels: bool = False  # scored against true labels, not by the judge
    judge_trusted: bool = False  # the judge that scored it passed its own gate
    judge_drifted: bool = False  # the judge in use fell from people's recent labels (watch)
    production_version: int | None = None  # None: the agent's seed prompts, no version yet
    # reply against reply on the same held-out requests (`promotion.pairwise`), where no
    # true label scored them
    pairwise: PairwiseEvidence | None = None
    # each secondary criterion scored on both versions' held-out replies by its own judge
    criteria: tuple[CriterionEvidence, ...] = ()


@dataclass(frozen=True)
class PromotionDecision:
    passed: bool
    reason: str  # one sentence for people, with the numbers
    gain: float  # mean held-out score, candidate minus production
    low: float | None  # the paired bootstrap interval of the gain
    high: float | None
    slice_drops: dict[str, float] = field(default_factory=dict)  # slices that fell too far
    criteria: tuple[CriterionVerdict, ...] = ()  # each secondary criterion, measured

    def tags(self, prefix: str = "flywheel.gate.") -> dict[str, str]:
        """The decision as MLflow tags."""
        interval = "none" if self.low is None else f"[{self.low:.4f}, {self.high:.4f}]"
        return {
            prefix + "passed": str(self.passed).lower(),
            prefix + "reason": self.reason,
            prefix + "gain": f"{self.gain:.4f}",
            prefix + "interval": interval,
        }


def decide(
    evidence: Evidence,
    cfg: PromotionSettings,
    seed: int = 0,
    unchanged: bool = False,
    must_pass: Sequence[CaseResult] = (),
) -> PromotionDecision:
    """Pass only when every condition holds; the reason names each one that did not.
    `unchanged`: no step was kept, so the candidate is production itself; `must_pass`:
    the candidate's must-pass cases, each failure named."""
    ids, new, old = paired(evidence)
    if not ids:
        return PromotionDecision(False, "no held-out example was scored for both", 0.0, None, None)
    estimate = paired_gain(new, old, cfg, seed)
    gain, low, high = estimate.value, estimate.low, estimate.high
    against = (
        f"v{evidence.production_version}" if evidence.production_version else "the seed prompts"
    )
    shown = f"[{low:.3f}, {high:.3f}]" if low is not None else "(no interval)"
    measured = f"held-out gain {gain:+.3f} {shown} over {against} on {len(ids)} examples"
    failed = []
    if unchanged:  # its zero gain is no measurement of a new version: there is none
        failed.append(
            "no step beat production on the selection slice, so the candidate is production itself"
        )
    if len(ids) < cfg.min_examples:
        failed.append(
            f"{len(ids)} examples are fewer than promotion.min_examples {cfg.min_examples}"
        )
    if gain < cfg.min_gain:
        failed.append(f"gain below promotion.min_gain {cfg.min_gain:.3f}")
    if low is None or low <= 0:
        failed.append("its interval does not exclude zero")
    drops = _slice_drops(ids, new, old, evidence.slices, cfg)
    if drops:
        worst = ", ".join(f"{name} {-drop:+.3f}" for name, drop in sorted(drops.items()))
        failed.append(f"slices fell beyond promotion.max_slice_drop {cfg.max_slice_drop}: {worst}")
    if not (evidence.by_labels or evidence.judge_trusted):
        failed.append("it was scored by a judge that did not pass its gate, and no true labels")
    if evidence.judge_drifted:  # its steps were chosen on a judge people no longer agree with
        failed.append("the judge in use drifted from people's recent labels (judge watch)")
    failed += [case.sentence() for case in must_pass if not case.passed]  # whatever the mean
    criteria = criterion_verdicts(
        evidence.criteria, lambda new, old: paired_gain(new, old, cfg, seed)
    )
    measured += "".join(f"; {criterion.line()}" for criterion in criteria)
    failed += [criterion.sentence() for criterion in criteria if criterion.dropped]
    if evidence.pairwise is not None:
        measured += f"; {evidence.pairwise.line()}"
        failed += _pairwise_failures(evidence.pairwise, cfg)
    if failed:
        reason = f"{measured}; refused: {'; '.join(failed)}"
        return PromotionDecision(False, reason, gain, low, high, drops, criteria)
    return PromotionDecision(True, f"{measured}; passed", gain, low, high, criteria=criteria)


def _pairwise_failures(pairwise: PairwiseEvidence, cfg: PromotionSettings) -> list[str]:
    """Why the side-by-side comparison holds the candidate back: its win rate's interval
    not above 0.5, or a judge whose verdicts follow the order of the replies too often."""
    failed = []
    if pairwise.low is None or not pairwise.low > 0.5:
        failed.append("its pairwise win rate's interval does not lie above 0.5")
    if pairwise.flip_rate > cfg.max_position_flips:
        failed.append(
            f"the pairwise judge's verdict flipped with the order on {pairwise.flip_rate:.0%} "
            f"of the pairs (promotion.max_position_flips {cfg.max_position_flips:.0%}): "
            "its win rate is not trusted"
        )
    return failed


def paired(evidence: Evidence) -> tuple[list[str], list[float], list[float]]:
    """(the ids scored for both versions, sorted; the candidate's scores; production's)."""
    ids = sorted(set(evidence.candidate) & set(evidence.production))
    return ids, [evidence.candidate[i] for i in ids], [evidence.production[i] for i in ids]


def paired_gain(
    new: list[float], old: list[float], cfg: PromotionSettings, seed: int = 0
) -> Estimate:
    """The mean gain of `new` over `old`, paired by example, with the 95% interval of a
    bootstrap over examples (`cfg.resamples`): the gate's measure, of all the held-out
    examples or of one slice."""
    return bootstrap(lambda a, b: fmean(a) - fmean(b), new, old, resamples=cfg.resamples, seed=seed)


def slice_members(ids: list[str], slices: dict[str, str]) -> dict[str, list[int]]:
    """Slice -> the positions in `ids` of its examples (an example with no slice: none)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, example_id in enumerate(ids):
        if example_id in slices:
            groups[slices[example_id]].append(i)
    return dict(groups)


def _slice_drops(
    ids: list[str],
    new: list[float],
    old: list[float],
    slices: dict[str, str],
    cfg: PromotionSettings,
) -> dict[str, float]:
    """Slice -> how far its mean fell, for the slices that fell beyond the allowed drop."""
    drops = {}
    for name, members in slice_members(ids, slices).items():
        if len(members) < cfg.min_slice_size:
            continue
        drop = fmean(old[i] for i in members) - fmean(new[i] for i in members)
        if drop > cfg.max_slice_drop:
            drops[name] = drop
    return drops
