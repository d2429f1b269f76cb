import math

from judges.gate import gate_judge
from judges.judge import Judge


def in_use(version: int, kappa: float) -> Judge:
    """The judge at judge-production, re-measured on tonight's held-out labels."""
    return Judge({"rubric": "r"}, versions={"judge": version}, heldout={"kappa": kappa})


V3 = in_use(3, 0.31)


def test_first_judge_above_the_floor_passes():
    decision = gate_judge(0.31, 0.20, None)
    assert decision.passed and not decision.keeps_in_use
    assert "becomes judge-production" in decision.reason


def test_better_than_the_judge_in_use_passes_and_a_tie_too():
    assert gate_judge(0.40, 0.20, V3).passed
    tie = gate_judge(0.31, 0.20, V3)
    assert tie.passed and "replaces judge v3" in tie.reason


def test_a_tie_from_no_newer_label_keeps_the_judge_in_use():
    """A quiet night aligns the same judge again on the same labels: production's judge
    does not change for it (the week test's second night registered a twin of v1)."""
    tie = gate_judge(0.31, 0.20, V3, taught=False)
    assert not tie.passed and tie.keeps_in_use
    assert "no label newer than those judge v3 learned from; kept judge v3" in tie.reason
    assert gate_judge(0.35, 0.20, V3, taught=False).passed  # better still replaces it


def test_below_the_floor_keeps_the_judge_in_use():
    decision = gate_judge(0.05, 0.20, V3)
    assert not decision.passed and decision.keeps_in_use
    assert decision.reason == "new judge kappa 0.05 < floor 0.20; kept judge v3 (kappa 0.31)"


def test_worse_than_the_judge_in_use_keeps_it_even_above_the_floor():
    decision = gate_judge(0.25, 0.20, V3)
    assert not decision.passed and decision.keeps_in_use
    assert "0.25 < judge v3's 0.31" in decision.reason and "kept judge v3" in decision.reason


def test_no_judge_in_use_and_below_the_floor_fails():
    decision = gate_judge(0.05, 0.20, None)
    assert not decision.passed and not decision.keeps_in_use
    assert decision.reason == "new judge kappa 0.05 < floor 0.20 and no judge is in use"


def test_an_undefined_kappa_never_passes():
    assert not gate_judge(math.nan, 0.20, None).passed
    assert not gate_judge(0.5, 0.20, in_use(1, math.nan)).passed


def test_too_few_held_out_labels_never_pass_whatever_the_agreement():
    few = gate_judge(0.9, 0.20, None, labels=5, min_labels=20)
    assert not few.passed and not few.enough_labels and not few.keeps_in_use
    assert "only 5 held-out labels" in few.reason and "untrusted" in few.reason
    kept = gate_judge(0.9, 0.20, V3, labels=5, min_labels=20)
    assert not kept.passed and kept.keeps_in_use and "kept judge v3" in kept.reason
    enough = gate_judge(0.9, 0.20, V3, labels=20, min_labels=20)
    assert enough.passed and enough.enough_labels


def test_no_held_out_label_never_passes_even_when_the_setting_asks_for_none():
    """A night with no labels measured nothing: no judge is trusted on it, whatever
    judge.min_heldout_labels says."""
    none = gate_judge(0.0, -1.0, None, labels=0, min_labels=0)
    assert not none.passed and not none.enough_labels
    assert none.reason.startswith("the new judge measured on no held-out labels")
    kept = gate_judge(0.0, -1.0, V3, labels=0, min_labels=20)
    assert not kept.passed and kept.keeps_in_use and kept.reason.endswith("; kept judge v3")
