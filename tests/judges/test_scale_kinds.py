"""The scale kind as a strategy: per kind, how a reply is read, how a verdict is scored and
cut, which agreement statistics apply, and how unsure the judge is where a label is asked."""

from __future__ import annotations

import pytest
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

from infra.scales import KINDS, ScoreScale
from judges.agreement import agreement_report
from judges.kinds import PASS_CUT, Categorical, NoVerdict, Numeric, PassFail, kind_of
from judges.pointwise import CHOICES, PASS_QUESTION

BOOLEAN = ScoreScale("boolean")
NOMINAL = ScoreScale("categorical", ("billing", "shipping", "other"))
ORDINAL = ScoreScale("categorical", ("bad", "ok", "good"), ordinal=True)
VALUED = ScoreScale("categorical", ("wrong", "partial", "right"), values=(0.0, 0.5, 1.0))
STARS = ScoreScale("numeric", minimum=1, maximum=5)
CONTINUOUS = ScoreScale("numeric", minimum=0.0, maximum=1.5)
UNBOUNDED = ScoreScale("numeric")


def test_every_kind_of_scale_has_its_strategy_bound_to_the_scale():
    scales = {"boolean": BOOLEAN, "categorical": NOMINAL, "numeric": STARS}
    assert set(scales) == set(KINDS)
    kinds = {name: kind_of(scale) for name, scale in scales.items()}
    assert [type(kind) for kind in kinds.values()] == [PassFail, Categorical, Numeric]
    assert all(kind.scale is scales[name] for name, kind in kinds.items())
    # only the pass/fail judge is read at a calibrated threshold (LoRA, head, injection check)
    assert [kind.pass_fail for kind in kinds.values()] == [True, False, False]


def test_the_pass_fail_answers_are_what_the_probability_judge_reads_and_trains_on():
    kind = kind_of(BOOLEAN)
    assert kind.answers == CHOICES and kind.question == PASS_QUESTION
    assert (kind.answer(True), kind.answer(False)) == ("Yes", "No")


# -- parse ------------------------------------------------------------------------------


def test_pass_fail_reads_words_and_langfuse_numbers_and_refuses_both_at_once():
    kind = kind_of(BOOLEAN)
    assert kind.bare("No, wrong city.") == ("No", "wrong city.")
    assert [kind.read(raw) for raw in ("PASS", "it failed", 1.0, 0, True)] == [
        True,
        False,
        True,
        False,
        True,
    ]
    with pytest.raises(NoVerdict, match="ambiguous: 'pass or fail' says both pass and fail"):
        kind.read("pass or fail")
    with pytest.raises(NoVerdict, match="no verdict: 0.5 is not a boolean"):
        kind.read(0.5)
    with pytest.raises(NoVerdict, match="expected a leading yes/no, pass/fail or true/false"):
        kind.bare("No verdict is possible")  # "No" does not stand alone


def test_categorical_reads_one_category_by_name_or_by_its_value():
    kind = kind_of(ScoreScale("categorical", ("correct", "partially correct", "incorrect")))
    assert kind.bare("Partially correct: misses X.\nmore") == (
        "Partially correct: misses X.",
        "Partially correct: misses X.\nmore",
    )
    assert kind.read("It is PARTIALLY CORRECT.") == "partially correct"  # "correct" is inside
    assert kind_of(VALUED).read(0.5) == "partial"  # the Langfuse value of a category
    with pytest.raises(NoVerdict, match="ambiguous: 'correct or incorrect' names correct, inc"):
        kind.read("correct or incorrect")
    with pytest.raises(NoVerdict, match="names none of correct, partially correct, incorrect"):
        kind.read("fine")


def test_numeric_reads_a_number_in_range_and_refuses_a_fraction_of_another_scale():
    kind = kind_of(STARS)
    assert kind.bare("4. Good but terse.") == ("4", "Good but terse.")
    assert kind.read("5/5") == 5.0 and kind.read(3) == 3.0  # "Score: 5/5" gives "5/5"
    with pytest.raises(NoVerdict, match=r"out of range: 3/10 is not on a scale up to 5"):
        kind.read("3/10")
    with pytest.raises(NoVerdict, match=r"out of range: 7 is outside \[1, 5\]"):
        kind.read(7)
    with pytest.raises(NoVerdict, match="no verdict: True is not a number"):
        kind.read(True)
    with pytest.raises(NoVerdict, match="expected a leading number"):
        kind.bare("four")


# -- score and cut ----------------------------------------------------------------------


def test_pass_fail_is_scored_by_p_yes_and_cut_at_its_own_threshold():
    kind = kind_of(BOOLEAN)
    probs = {"Yes": 0.3, "No": 0.7}
    assert kind.from_probabilities(probs, 0.25) is True
    assert kind.from_probabilities(probs, 0.5) is False
    assert kind.span == (0.0, 1.0) and kind.placed(False, probs) == 0.3
    assert kind.pass_cut(0.46) == 0.46 and kind.cut(0.46) == "threshold 0.460"
    assert kind.said(0.46, 0.46, None) is True and kind.said(0.45, 0.46, None) is False
    assert (kind.stored(True), kind.stored(False)) == (1.0, 0.0)  # as Langfuse keeps it


def test_categories_are_scored_by_their_values_or_their_ranks_and_cut_at_the_middle():
    probs = {"wrong": 0.2, "partial": 0.5, "right": 0.3}
    valued = kind_of(VALUED)
    assert valued.from_probabilities(probs, 0.9) == "partial"  # the most probable
    assert valued.span == (0.0, 1.0)
    assert valued.placed("partial", probs) == pytest.approx(0.5 * 0.5 + 0.3 * 1.0)
    ordinal = kind_of(ORDINAL)
    assert ordinal.span == (0.0, 2.0)
    assert ordinal.placed("ok", {"bad": 0.5, "ok": 0.0, "good": 0.5}) == pytest.approx(1.0)
    assert ordinal.pass_cut(0.9) == PASS_CUT == 0.5
    assert ordinal.cut(0.9) == "ordinal categorical (bad < ok < good) scale"
    assert ordinal.said(0.1, 0.5, "good") == "good" and ordinal.said(0.1, 0.5, None) is None
    assert kind_of(NOMINAL).span is None  # no better or worse
    assert "no better or worse (billing, shipping, other)" in kind_of(NOMINAL).ranking_problem()
    assert ordinal.ranking_problem() is None


def test_a_number_is_scored_by_its_place_in_the_range_and_read_as_the_expected_level():
    kind = kind_of(STARS)
    probs = {"1": 0.0, "2": 0.0, "3": 0.5, "4": 0.0, "5": 0.5}
    assert kind.answers == ("1", "2", "3", "4", "5")
    assert kind.from_probabilities(probs, 0.5) == pytest.approx(4.0)
    assert kind.span == (1.0, 5.0) and kind.placed(4.0, probs) == 4.0
    assert kind.agreement_value(2.5) == 3.0 and kind.agreement_value(2.49) == 2.0
    assert kind_of(CONTINUOUS).answers is None  # read from text
    assert kind_of(CONTINUOUS).agreement_value(0.73) == 0.73  # no levels to round to
    assert kind_of(UNBOUNDED).span is None
    assert "numeric without a range" in kind_of(UNBOUNDED).ranking_problem()


def test_the_search_credits_the_labels_answer_weighted_or_a_numbers_closeness():
    pass_fail = kind_of(BOOLEAN)
    weights = pass_fail.weights([True, False, False, False])
    assert weights["Yes"] == pytest.approx(3 * weights["No"])  # the rare answer counts more
    assert pass_fail.credit(True, {"Yes": 0.8, "No": 0.2}, True, weights) == pytest.approx(
        0.8 * weights["Yes"]
    )
    categories = kind_of(NOMINAL)
    weights = categories.weights(["billing", "billing", "other"])
    assert categories.credit("other", {"billing": 0.3, "other": 0.6}, "other", weights) == (
        pytest.approx(0.6 * weights["other"])
    )
    numbers = kind_of(STARS)
    assert numbers.weights([1.0, 1.0, 5.0]) == {}  # scored by distance, not by answer
    assert numbers.credit(4.0, {}, 5.0, {}) == pytest.approx(0.75)  # a quarter of the range
    assert kind_of(UNBOUNDED).credit(4.0, {}, 5.0, {}) == pytest.approx(0.5)  # 1 / (1 + 1)


# -- agreement --------------------------------------------------------------------------

PASS_PRED = [True, True, True, True, True, False, False, False, False, False]
PASS_GOLD = [True, True, True, False, False, True, False, False, False, False]


def test_pass_fail_agreement_is_cohens_kappa_with_the_rates_beside_it():
    kind = kind_of(BOOLEAN)
    assert kind.primary == "kappa"
    statistics = dict(kind.statistics(PASS_PRED, PASS_GOLD))
    assert list(statistics) == ["accuracy", "kappa"]
    assert statistics["kappa"](PASS_PRED, PASS_GOLD) == pytest.approx(
        cohen_kappa_score(PASS_PRED, PASS_GOLD)
    )
    assert kind.rates(PASS_PRED, PASS_GOLD) == pytest.approx({"tpr": 0.75, "tnr": 4 / 6})
    assert kind.rates([True, False], [False, False]) == {"tnr": 0.5}  # no pass: no TPR
    kind.check([1.0, 0.0, "anything"])  # lenient: 1.0/0.0 and True/False both work


def test_nominal_categories_agree_by_kappa_ranked_ones_by_weighted_kappa_and_rho():
    pred, gold = ["bad", "ok", "good", "good", "ok"], ["bad", "good", "good", "ok", "ok"]
    nominal = kind_of(NOMINAL)
    assert nominal.primary == "kappa"
    assert [name for name, _ in nominal.statistics(pred, gold)] == ["accuracy", "kappa"]
    ordinal = kind_of(ORDINAL)
    assert ordinal.primary == "weighted_kappa"
    statistics = dict(ordinal.statistics(pred, gold))
    assert list(statistics) == ["accuracy", "weighted_kappa", "spearman"]
    assert statistics["weighted_kappa"](pred, gold) == pytest.approx(
        cohen_kappa_score(pred, gold, labels=list(ORDINAL.categories), weights="quadratic")
    )
    ranks = {"bad": 0, "ok": 1, "good": 2}
    rho = spearmanr([ranks[v] for v in pred], [ranks[v] for v in gold]).statistic
    assert statistics["spearman"](pred, gold) == pytest.approx(rho)
    assert ordinal.rates(pred, gold) == {}
    with pytest.raises(ValueError, match="'great' is not on the categorical scale"):
        ordinal.check(["bad", "great"])


def test_numbers_agree_by_weighted_kappa_on_levels_and_by_rho_between_them():
    kind = kind_of(STARS)
    assert kind.primary == "weighted_kappa"
    pred, gold = [1.0, 2.0, 4.0, 5.0, 3.0], [1.0, 3.0, 4.0, 5.0, 2.0]
    statistics = dict(kind.statistics(pred, gold))
    assert list(statistics) == ["accuracy", "weighted_kappa", "spearman"]
    assert statistics["spearman"](pred, gold) == pytest.approx(spearmanr(pred, gold).statistic)
    # a verdict between the levels leaves only the ranks to compare
    assert [name for name, _ in kind.statistics([1.5, 2.0], [1.0, 2.0])] == ["spearman"]
    assert kind_of(CONTINUOUS).primary == "spearman"
    with pytest.raises(ValueError, match="7 is not on the numeric scale"):
        kind.check([2.0, 7])


def test_the_report_holds_each_kinds_statistics_and_its_primary_one():
    cases = [
        (BOOLEAN, PASS_PRED, PASS_GOLD),
        (NOMINAL, ["billing", "other", "other"], ["billing", "other", "shipping"]),
        (ORDINAL, ["bad", "ok", "good", "ok"], ["bad", "good", "good", "ok"]),
        (STARS, [1.0, 2.0, 4.0, 5.0], [1.0, 3.0, 4.0, 5.0]),
        (CONTINUOUS, [0.1, 0.7, 1.2, 0.4], [0.2, 0.5, 1.4, 0.3]),
    ]
    for scale, pred, gold in cases:
        kind = kind_of(scale)
        report = agreement_report(pred, gold, scale=scale)
        names = [name for name, _ in kind.statistics(pred, gold)]
        assert kind.primary in names and kind.primary in report, scale
        assert {f"{n}_low" for n in names} <= set(report), scale


# -- how unsure, where a label is asked -------------------------------------------------


def test_pass_fail_is_unsure_near_its_threshold():
    kind = kind_of(BOOLEAN)
    scores = {"a": 0.9, "b": 0.45, "c": 0.2}
    margins = kind.label_margins(scores, {"a": 0.0}, 0.5)  # the verdicts' margins unused
    assert margins == pytest.approx({"a": 0.4, "b": 0.05, "c": 0.3})
    assert kind.unsure(0.45, 0.05, 0.5, None) == "p_pass 0.450 vs threshold 0.500"
    assert kind.distance(0.9, 0.5, 0.0) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="trace x: p_pass must be a probability, got 1.5"):
        kind.label_margins({"x": 1.5}, {}, 0.5)


def test_a_judge_on_its_own_scale_is_as_unsure_as_its_own_margin():
    for scale in (ORDINAL, STARS):
        kind = kind_of(scale)
        margins = {"a": 0.6, "b": 0.1}
        assert kind.label_margins({"a": 0.9, "b": 0.5}, margins, 0.5) == margins
        assert kind.distance(0.9, 0.5, 0.25) == 0.25  # the surer, the higher in the table
    assert kind_of(ORDINAL).unsure(0.5, 0.1, 0.5, "ok") == "margin 0.100, verdict ok"
    assert kind_of(STARS).unsure(0.5, 0.1, 0.5, 3.456) == "margin 0.100, verdict 3.46"
    assert kind_of(STARS).unsure(0.0, 0.0, 0.5, None) == "margin 0.000, verdict unreadable"


# -- values: labels, and as people read them --------------------------------------------


def test_labels_are_read_onto_the_scale_and_several_agree_only_on_numbers():
    pass_fail = kind_of(BOOLEAN)
    assert [pass_fail.on_scale(v) for v in (1.0, 0.0, True, 0.5, "yes")] == [
        True,
        False,
        True,
        None,
        None,
    ]
    assert kind_of(NOMINAL).on_scale("other") == "other"
    assert kind_of(NOMINAL).on_scale("Other") is None
    assert kind_of(STARS).on_scale(6.0) is None
    assert pass_fail.agreed([True, False]) is None
    assert kind_of(NOMINAL).agreed(["billing", "other"]) is None
    assert kind_of(STARS).agreed([2.0, 3.0, 5.0]) == pytest.approx(10 / 3)


def test_values_are_shown_as_people_read_them():
    assert kind_of(BOOLEAN).show(1.0) == "Yes" and kind_of(BOOLEAN).show(0) == "No"
    assert kind_of(NOMINAL).show("billing") == "billing"
    assert kind_of(STARS).show(4.456) == "4.46" and kind_of(STARS).show(4.0) == "4"
    assert kind_of(STARS).answer(4.0) == "4" and kind_of(CONTINUOUS).answer(0.75) == "0.75"
    assert kind_of(NOMINAL).stored("billing") == "billing"  # sent as it is
    assert kind_of(STARS).stored(3.5) == 3.5
