import math

import pytest

from judges.active_learning import least_certain, least_sure


def test_picks_the_smallest_margins_and_never_a_labelled_trace():
    p_pass = {"a": 0.95, "b": 0.52, "c": 0.40, "d": 0.49, "e": 0.05, "f": 0.50}
    picked = least_certain(p_pass, labelled={"f", "d"}, threshold=0.5, n=2)
    # f (margin 0) and d (0.01) are the least sure, but humans already labelled them.
    assert [u.trace_id for u in picked] == ["b", "c"]
    assert picked[0].margin == pytest.approx(0.02) and picked[0].p_pass == 0.52


def test_margin_is_taken_around_the_calibrated_threshold():
    picked = least_certain({"a": 0.5, "b": 0.12, "c": 0.3}, (), threshold=0.1, n=1)
    assert [u.trace_id for u in picked] == ["b"]


def test_ties_are_broken_by_id_and_n_caps_the_pick():
    picked = least_certain({"z": 0.6, "a": 0.4, "m": 0.9}, (), threshold=0.5, n=5)
    assert [u.trace_id for u in picked] == ["a", "z", "m"]


def test_nothing_unlabelled_picks_nothing():
    assert least_certain({"a": 0.5}, {"a"}, 0.5, 3) == []
    assert least_certain({"a": 0.5}, (), 0.5, 0) == []


def test_bad_input_names_the_trace():
    with pytest.raises(ValueError, match="trace b: p_pass"):
        least_certain({"a": 0.5, "b": 1.5}, (), 0.5, 1)
    with pytest.raises(ValueError, match=">= 0"):
        least_certain({}, (), 0.5, -1)


def test_least_sure_takes_any_margin_smallest_first():
    margins = {"a": 0.4, "b": 0.05, "c": 0.0, "d": 0.05}
    assert least_sure(margins, labelled={"c"}, n=2) == [("b", 0.05), ("d", 0.05)]
    with pytest.raises(ValueError, match="trace x: a margin"):
        least_sure({"x": math.nan}, (), 1)
