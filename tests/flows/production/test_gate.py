"""The promotion gate: paired gain with an interval, slices, and a trusted measure."""

import pytest

from flows.production.gate import Evidence, decide
from infra.settings import PromotionSettings

CFG = PromotionSettings(resamples=500)


def evidence(new: list[float], old: list[float], **fields) -> Evidence:
    ids = [f"e{i}" for i in range(len(new))]
    slices = {i: ("PlayMusic" if n % 2 else "GetWeather") for n, i in enumerate(ids)}
    return Evidence(
        dict(zip(ids, new, strict=True)),
        dict(zip(ids, old, strict=True)),
        slices,
        **({"by_labels": True, "production_version": 3} | fields),
    )


def test_a_clear_paired_gain_passes_with_its_interval():
    decision = decide(evidence([1.0] * 30, [1.0] * 20 + [0.0] * 10), CFG)
    assert decision.passed and decision.gain == pytest.approx(10 / 30)
    assert 0 < decision.low <= decision.gain <= decision.high
    assert decision.reason.startswith("held-out gain +0.333 [")
    assert "over v3 on 30 examples; passed" in decision.reason
    assert decision.tags()["flywheel.gate.passed"] == "true"


def test_an_interval_that_includes_zero_is_refused_with_the_numbers():
    one_lucky = [1.0] + [0.0] * 29
    decision = decide(evidence(one_lucky, [0.0] * 30), CFG)
    assert not decision.passed and decision.gain > 0 and decision.low == 0.0
    assert "refused: its interval does not exclude zero" in decision.reason


def test_a_night_that_kept_no_step_says_its_candidate_is_production_itself():
    scores = [1.0] * 20 + [0.0] * 10
    decision = decide(evidence(scores, scores), CFG, unchanged=True)
    assert not decision.passed and decision.gain == 0.0
    said = "no step beat production on the selection slice, so the candidate is production"
    assert f"refused: {said} itself" in decision.reason
    assert "no step" not in decide(evidence(scores, scores), CFG).reason


def test_a_slice_that_falls_holds_the_version_back_even_with_a_gain():
    # GetWeather (even ids) all go from right to wrong; PlayMusic from wrong to right, twice
    # as many: the mean rises, one slice collapses.
    new = [0.0 if i % 2 == 0 else 1.0 for i in range(40)] + [1.0] * 20
    old = [1.0 if i % 2 == 0 else 0.0 for i in range(40)] + [0.0] * 20
    ev = evidence(new, old)
    ev = Evidence(
        ev.candidate,
        ev.production,
        {**ev.slices, **{f"e{i}": "Other" for i in range(40, 60)}},
        True,
        False,
        3,
    )
    decision = decide(ev, CFG)
    assert not decision.passed and decision.gain > 0
    assert decision.slice_drops == {"GetWeather": 1.0}
    assert "slices fell beyond promotion.max_slice_drop 0.1: GetWeather -1.000" in decision.reason


def test_small_slices_are_not_checked():
    cfg = PromotionSettings(resamples=500, min_slice_size=50)
    new = [0.0 if i % 2 == 0 else 1.0 for i in range(40)] + [1.0] * 20
    old = [1.0 if i % 2 == 0 else 0.0 for i in range(40)] + [0.0] * 20
    assert decide(evidence(new, old), cfg).slice_drops == {}


def test_an_untrusted_judge_without_labels_cannot_promote():
    gain = ([1.0] * 30, [0.0] * 30)
    untrusted = decide(evidence(*gain, by_labels=False, judge_trusted=False), CFG)
    assert not untrusted.passed and "judge that did not pass its gate" in untrusted.reason
    assert decide(evidence(*gain, by_labels=False, judge_trusted=True), CFG).passed


def test_min_gain_and_the_first_production():
    cfg = PromotionSettings(resamples=500, min_gain=0.5)
    decision = decide(evidence([1.0] * 30, [1.0] * 20 + [0.0] * 10, production_version=None), cfg)
    assert not decision.passed and "gain below promotion.min_gain 0.500" in decision.reason
    assert "over the seed prompts" in decision.reason


def test_nothing_scored_on_both_is_refused():
    decision = decide(Evidence({"a": 1.0}, {"b": 0.0}), CFG)
    assert not decision.passed and decision.reason == "no held-out example was scored for both"


def test_too_few_examples_never_promote_however_clear_their_gain():
    one = decide(evidence([1.0], [0.0]), CFG)
    assert one.low == one.high == 1.0  # one lucky example: its interval excludes zero
    assert not one.passed and "1 examples are fewer than promotion.min_examples 10" in one.reason
    assert decide(evidence([1.0] * 10, [0.0] * 10), CFG).passed
