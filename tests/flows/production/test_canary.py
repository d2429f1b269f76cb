"""The verdict on a canary: its traces' scores against production's, unpaired."""

import pytest
from pydantic import ValidationError

from flows.production.canary import judge_canary, mean_gain
from infra.settings import PromotionSettings, Settings

CFG = PromotionSettings(resamples=500, canary_min_traces=20)


def scores(passed: int, total: int) -> list[float]:
    return [1.0] * passed + [0.0] * (total - passed)


def test_a_canary_that_clearly_beats_production_is_promoted():
    decision = judge_canary(scores(27, 30), scores(15, 30), CFG)
    assert decision.action == "promote"
    assert decision.gain == pytest.approx(0.4) and decision.low > 0
    assert "on 30 canary and 30 production traces" in decision.reason


def test_a_canary_that_clearly_loses_is_rolled_back():
    decision = judge_canary(scores(10, 30), scores(26, 40), CFG)
    assert decision.action == "roll back"
    assert decision.high < 0 and (decision.canary, decision.production) == (30, 40)


def test_a_canary_whose_interval_holds_zero_is_kept():
    decision = judge_canary(scores(20, 30), scores(19, 30), CFG)
    assert decision.action == "keep"
    assert decision.low < 0 < decision.high


def test_a_canary_with_too_few_traces_is_kept_without_a_verdict():
    decision = judge_canary(scores(19, 19), scores(0, 200), CFG)  # a landslide, on 19
    assert decision.action == "keep" and decision.gain is None
    assert "only 19 canary and 200 production traces" in decision.reason
    assert "promotion.canary_min_traces is 20" in decision.reason


def test_the_interval_is_scipys_percentile_bootstrap_of_each_group_on_its_own():
    # every score alike in each group: the difference is exact, and no NaN from BCa
    assert mean_gain([1.0] * 25, [0.0] * 25, 200) == (1.0, 1.0, 1.0)
    gain, low, high = mean_gain(scores(15, 30), scores(15, 30), 2000)
    assert gain == 0.0 and low < 0 < high
    assert mean_gain(scores(15, 30), scores(5, 30), 300, seed=3) == mean_gain(
        scores(15, 30), scores(5, 30), 300, seed=3
    )


@pytest.mark.parametrize("share", [-0.1, 1.0, 1.5])
def test_a_canary_share_outside_zero_to_one_is_a_settings_error(share):
    with pytest.raises(ValidationError, match="canary_share"):
        Settings(promotion={"canary_share": share})
