"""The gate's secondary criteria: the primary must improve, no other criterion may fall
beyond its tolerance, and a criterion whose judge failed its gate neither blocks nor
passes."""

from flows.production.criteria_gate import CriterionEvidence
from flows.production.gate import Evidence, decide
from infra.settings import PromotionSettings

CFG = PromotionSettings(resamples=500)
IDS = [f"e{i}" for i in range(30)]
# the primary: 20 of 30 right in production, all 30 for the candidate
BETTER = Evidence(
    dict.fromkeys(IDS, 1.0),
    {i: float(n < 20) for n, i in enumerate(IDS)},
    by_labels=True,
    production_version=3,
)


def polite(max_drop: float, trusted: bool = True) -> CriterionEvidence:
    """Polite on 27 of 30 replies in production, 18 of 30 for the candidate: -0.3."""
    return CriterionEvidence(
        "polite",
        candidate={i: float(n < 18) for n, i in enumerate(IDS)},
        production={i: float(n < 27) for n, i in enumerate(IDS)},
        trusted=trusted,
        max_drop=max_drop,
    )


def with_criteria(*criteria: CriterionEvidence) -> Evidence:
    return Evidence(**(vars(BETTER) | {"criteria": criteria}))


def test_the_primary_alone_passes():
    assert decide(BETTER, CFG).passed


def test_a_criterion_that_drops_beyond_its_tolerance_blocks_promotion_and_is_named():
    decision = decide(with_criteria(polite(max_drop=0.05)), CFG)
    assert not decision.passed and decision.gain > 0.3  # the primary improved
    assert "criterion polite 0.900 -> 0.600 (-0.300 [" in decision.reason
    assert "refused: criterion polite fell -0.300, beyond its" in decision.reason
    assert "traces.criteria.polite.max_drop 0.050" in decision.reason
    (verdict,) = decision.criteria
    assert verdict.dropped and verdict.examples == 30
    assert verdict.gain.low <= -0.3 <= verdict.gain.high


def test_the_same_candidate_passes_when_the_tolerance_is_wide():
    decision = decide(with_criteria(polite(max_drop=0.5)), CFG)
    assert decision.passed, decision.reason
    assert "criterion polite 0.900 -> 0.600" in decision.reason
    assert not decision.criteria[0].dropped


def test_a_criterion_judged_by_an_untrusted_judge_neither_blocks_nor_passes():
    decision = decide(with_criteria(polite(max_drop=0.05, trusted=False)), CFG)
    assert decision.passed
    assert "by a judge that did not pass its gate: not checked" in decision.reason
    # nor does it pass a candidate the primary refuses
    flat = Evidence(**(vars(BETTER) | {"candidate": BETTER.production}))
    unblocked = polite(max_drop=0.5, trusted=False)
    assert not decide(Evidence(**(vars(flat) | {"criteria": (unblocked,)})), CFG).passed


def test_each_criterion_is_checked_on_its_own():
    kind = CriterionEvidence("concise", dict.fromkeys(IDS, 1.0), dict.fromkeys(IDS, 1.0), True)
    decision = decide(with_criteria(kind, polite(max_drop=0.05)), CFG)
    assert not decision.passed
    assert "criterion concise 1.000 -> 1.000 (+0.000" in decision.reason
    assert "concise fell" not in decision.reason and "polite fell" in decision.reason
