import pytest

from judges.calibration import balanced_accuracy, calibrate_threshold
from judges.metrics import (
    accuracy,
    agreement_report,
    bootstrap,
    cohen_kappa,
    true_negative_rate,
    true_positive_rate,
)

T, F = True, False


def test_kappa_matches_hand_computation():
    # 10 items: judge/human agree on 3 passes and 4 fails; 2 false passes, 1 false fail.
    pred = [T, T, T, T, T, F, F, F, F, F]
    gold = [T, T, T, F, F, T, F, F, F, F]
    # observed = 7/10; p_pred = .5, p_gold = .4; expected = .5*.4 + .5*.6 = .5
    assert accuracy(pred, gold) == pytest.approx(0.7)
    assert cohen_kappa(pred, gold) == pytest.approx((0.7 - 0.5) / (1 - 0.5))
    assert true_positive_rate(pred, gold) == pytest.approx(3 / 4)
    assert true_negative_rate(pred, gold) == pytest.approx(4 / 6)


def test_kappa_edge_cases():
    assert cohen_kappa([T, F, T], [T, F, T]) == 1.0  # perfect agreement
    assert cohen_kappa([T, T, T], [T, T, T]) == 1.0  # one class only, full agreement
    assert cohen_kappa([F, F, F], [T, T, T]) == pytest.approx(0.0)  # one class each, disagree
    assert cohen_kappa([T, F], [F, T]) == pytest.approx(-1.0)
    assert true_positive_rate([F, F], [F, F]) is None


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="verdicts"):
        accuracy([T], [T, F])
    with pytest.raises(ValueError, match="no labels"):
        cohen_kappa([], [])


def test_bootstrap_interval_contains_value_and_is_seeded():
    pred = [T, F] * 20
    gold = [T, T, F, F] * 10
    first = bootstrap(accuracy, pred, gold, seed=3)
    assert first.low <= first.value <= first.high
    assert first.low < first.high
    assert bootstrap(accuracy, pred, gold, seed=3) == first


def test_agreement_report_has_cis():
    report = agreement_report([T, F, T, F], [T, F, F, F])
    assert report["accuracy"] == pytest.approx(0.75)
    assert report["kappa_low"] <= report["kappa"] <= report["kappa_high"]
    assert report["n"] == 4


def test_calibrated_threshold_separates_skewed_probabilities():
    # The judge says "no" to everything (p < .5) but still ranks passes higher.
    probs = [0.05, 0.1, 0.12, 0.2, 0.3, 0.35]
    gold = [F, F, F, T, T, T]
    cut = calibrate_threshold(probs, gold)
    assert 0.12 < cut <= 0.2
    assert balanced_accuracy([p >= cut for p in probs], gold) == 1.0
    assert calibrate_threshold([], []) == 0.5
