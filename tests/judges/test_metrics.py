import pytest

from infra.scales import ScoreScale
from judges.agreement import agreement_report
from judges.calibration import balanced_accuracy, calibrate_threshold
from judges.metrics import (
    Estimate,
    accuracy,
    bootstrap,
    cohen_kappa,
    flip_rate,
    spearman,
    true_negative_rate,
    true_positive_rate,
    weighted_kappa,
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


def test_multiclass_kappa_matches_hand_computation():
    a, b, c = "a", "b", "c"
    pred = [a, a, a, a, b, b, b, c, c, c]
    gold = [a, a, a, b, b, b, c, c, c, a]
    # observed = 7/10; both raters use a 4x, b 3x, c 3x: expected = (16 + 9 + 9)/100 = .34
    # kappa = (.7 - .34) / (1 - .34) = .36 / .66 = 6/11
    assert cohen_kappa(pred, gold) == pytest.approx(6 / 11)


def test_multiclass_kappa_edge_cases():
    assert cohen_kappa(["a", "b", "c"], ["a", "b", "c"]) == 1.0  # perfect agreement
    assert cohen_kappa(["a"] * 3, ["a"] * 3) == 1.0  # one class only, same one
    assert cohen_kappa(["a"] * 3, ["b"] * 3) == 0.0  # one class each, never agreeing


L, M, H = "low", "mid", "high"
ORDINAL_PRED = [L, L, M, M, H, H]
ORDINAL_GOLD = [L, M, M, H, H, M]
# Three disagreements, all between neighbours. Marginals: pred L2 M2 H2, gold L1 M3 H2.
# Expected cost = sum_a,b pred[a] * gold[b] * w(a, b) / 36, with pred[a] = 2 for every a.


def test_weighted_kappa_linear_by_hand():
    # w = |i-j|/2. observed = 3 * .5 / 6 = .25.
    # rows: L: M3*.5 + H2*1 = 3.5; M: L1*.5 + H2*.5 = 1.5; H: L1*1 + M3*.5 = 2.5
    # expected = 2 * (3.5 + 1.5 + 2.5) / 36 = 15/36; kappa = 1 - .25 / (15/36) = 1 - 3/5
    assert weighted_kappa(ORDINAL_PRED, ORDINAL_GOLD, [L, M, H]) == pytest.approx(0.4)


def test_weighted_kappa_quadratic_by_hand():
    # w = ((i-j)/2)^2. observed = 3 * .25 / 6 = .125.
    # rows: L: M3*.25 + H2*1 = 2.75; M: L1*.25 + H2*.25 = .75; H: L1*1 + M3*.25 = 1.75
    # expected = 2 * 5.25 / 36 = 7/24; kappa = 1 - .125 / (7/24) = 1 - 3/7 = 4/7
    kappa = weighted_kappa(ORDINAL_PRED, ORDINAL_GOLD, [L, M, H], "quadratic")
    assert kappa == pytest.approx(4 / 7)


def test_weighted_kappa_edge_cases_and_bad_input():
    assert weighted_kappa([L, M, H], [L, M, H], [L, M, H]) == 1.0
    assert weighted_kappa([M, M], [M, M], [L, M, H], "quadratic") == 1.0  # one class only
    with pytest.raises(ValueError, match="'huge'"):
        weighted_kappa([L, "huge"], [L, M], [L, M, H])
    with pytest.raises(ValueError, match="weights"):
        weighted_kappa([L], [L], [L, M, H], "cubic")


def test_spearman_with_ties_by_hand():
    # pred ranks 1, 2.5, 2.5, 4 (the two 2s share ranks 2 and 3); gold ranks 1, 3, 2, 4.
    # deviations from the mean rank 2.5: x = -1.5, 0, 0, 1.5; y = -1.5, .5, -.5, 1.5
    # sxy = 2.25 + 2.25 = 4.5; sxx = 4.5; syy = 5; rho = 4.5 / sqrt(4.5 * 5) = sqrt(.9)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9**0.5)
    assert spearman([3, 2, 1], [1, 2, 3]) == pytest.approx(-1.0)


def test_spearman_is_none_when_a_side_is_constant():
    assert spearman([2, 2, 2], [1, 2, 3]) is None
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    assert spearman([1], [1]) is None


def test_flip_rate_counts_changed_verdicts():
    # verdicts mapped back to the same answer: items 2 and 5 change when swapped -> 2/5
    first = ["A", "A", "B", "tie", "B"]
    second = ["A", "B", "B", "tie", "A"]
    assert flip_rate(first, second) == pytest.approx(0.4)
    assert flip_rate(["A"], ["A"]) == 0.0
    with pytest.raises(ValueError, match="verdicts"):
        flip_rate(["A"], ["A", "B"])


def test_bootstrap_skips_undefined_resamples():
    # Spearman is undefined on a resample that repeats one item only (3 of 27 resamples);
    # every defined resample of this perfectly ranked data has rho = 1.
    est = bootstrap(spearman, [1, 2, 3], [1, 2, 3], seed=0)
    assert est == Estimate(1.0, 1.0, 1.0)


def test_bootstrap_has_no_interval_when_mostly_undefined():
    gold = [T, T] + [F] * 8
    pred = [T] * 10

    def two_passes_only(p, g):  # defined on P(Binomial(10, .2) = 2) ~ 30% of resamples
        return accuracy(p, g) if sum(g) == 2 else None

    est = bootstrap(two_passes_only, pred, gold, seed=1)
    assert est == Estimate(0.2, None, None)
    assert str(est) == "0.200 [no interval]"
    undefined = bootstrap(spearman, [1, 1, 1], [1, 2, 3])
    assert undefined == Estimate(None, None, None) and str(undefined) == "undefined"


def test_boolean_report_keys_are_unchanged():
    pred, gold = [T, F, T, F, T], [T, F, F, F, T]
    report = agreement_report(pred, gold, 0)
    assert set(report) == {
        "n",
        *("accuracy", "accuracy_low", "accuracy_high"),
        *("kappa", "kappa_low", "kappa_high"),
        "tpr",
        "tnr",
    }
    assert agreement_report(pred, gold, 0, scale=ScoreScale("boolean")) == report


def test_categorical_report_has_accuracy_and_kappa():
    scale = ScoreScale("categorical", ("a", "b", "c"))
    report = agreement_report(["a", "b", "c", "a"], ["a", "b", "b", "a"], scale=scale)
    assert set(report) == {"n", *_with_ci("accuracy", "kappa")}
    assert report["accuracy"] == pytest.approx(0.75)


def test_ordinal_report_has_weighted_kappa_and_spearman():
    scale = ScoreScale("categorical", (L, M, H), ordinal=True)
    report = agreement_report(ORDINAL_PRED, ORDINAL_GOLD, scale=scale)
    assert set(report) == {"n", *_with_ci("accuracy", "weighted_kappa", "spearman")}
    assert report["weighted_kappa"] == pytest.approx(4 / 7)  # quadratic, as above
    assert report["accuracy"] == pytest.approx(0.5)


def test_numeric_report_drops_what_the_values_do_not_support():
    scale = ScoreScale("numeric", minimum=1, maximum=5)
    report = agreement_report([1, 2, 4, 5, 3], [1, 3, 4, 5, 2], scale=scale)
    assert set(report) == {"n", *_with_ci("accuracy", "weighted_kappa", "spearman")}
    # Between the levels, only ranks compare; a constant side has no rank correlation.
    between = agreement_report([1.5, 2, 4, 5], [1, 3, 4, 5], scale=scale)
    assert set(between) == {"n", *_with_ci("spearman")}
    assert set(agreement_report([1, 2, 3], [4, 4, 4], scale=scale)) == {
        "n",
        *_with_ci("accuracy", "weighted_kappa"),
    }
    with pytest.raises(ValueError, match="7"):
        agreement_report([7, 2], [1, 2], scale=scale)


def _with_ci(*names: str) -> set[str]:
    return {key for name in names for key in (name, f"{name}_low", f"{name}_high")}


def test_calibrated_threshold_separates_skewed_probabilities():
    # The judge says "no" to everything (p < .5) but still ranks passes higher.
    probs = [0.05, 0.1, 0.12, 0.2, 0.3, 0.35]
    gold = [F, F, F, T, T, T]
    cut = calibrate_threshold(probs, gold)
    assert 0.12 < cut <= 0.2
    assert balanced_accuracy([p >= cut for p in probs], gold) == 1.0
    assert calibrate_threshold([], []) == 0.5
