"""The helpers of the judge-alignment benchmark: no model, no MLflow store."""

import pytest

from benchmarks.judge_alignment import (
    UNPARSEABLE,
    order_agreement,
    single_order_verdicts,
    truncate_answers,
)
from benchmarks.mlflow_judge import (
    OrderVerdicts,
    first_line,
    free_port,
    judge_instructions,
    pair_fields,
    read_preference,
    served_model,
    unswap,
)
from benchmarks.pairwise_scoring import Fit, agreement, heldout_agreement
from judges.pairwise import pairwise_verdict, position_lean
from judges.types import PairwiseItem

ITEM = PairwiseItem(
    id="mtbench-007",
    group="q-1",
    question="What is 2+2?",
    answer_a="4",
    answer_b="5",
    human_prefers="A",
)


def test_pair_fields_show_the_question_and_both_labelled_answers():
    fields = pair_fields(ITEM)
    assert fields.inputs == "What is 2+2?"
    assert fields.outputs == "Answer A:\n4\n\nAnswer B:\n5"
    assert fields.label == "A"


def test_swapped_pair_fields_show_b_first_and_the_label_follows_the_answer():
    fields = pair_fields(ITEM, swapped=True)
    assert fields.outputs == "Answer A:\n5\n\nAnswer B:\n4"
    assert fields.label == "B"  # the human's answer ("4") is now shown as B
    unlabelled = PairwiseItem("x", "g", "q", "a", "b")
    assert pair_fields(unlabelled, swapped=True).label is None


def test_judge_instructions_keep_the_rubric_and_mlflow_template_variables():
    text = judge_instructions("Be fair.")
    assert text.startswith("Be fair.\n")
    assert "{{ inputs }}" in text and "{{ outputs }}" in text


@pytest.mark.parametrize(
    ("value", "expected"),
    [("A", "A"), ("b", "B"), (" B. ", "B"), ('"a"', "A"), ("**A**", "A")]
    + [("tie", None), ("Answer A", None), ("", None), (None, None), (1, None), (True, None)],
)
def test_read_preference_accepts_a_bare_label_only(value, expected):
    assert read_preference(value) == expected


def test_unswap_maps_a_swapped_verdict_back():
    assert (unswap("A"), unswap("B"), unswap(None)) == ("B", "A", None)


def test_first_line_names_the_type_and_cuts_long_messages():
    error = ValueError("\n  Failed to parse response from judge model. Response: x\nmore")
    assert first_line(error) == "ValueError: Failed to parse response from judge model. Response: x"
    assert first_line(RuntimeError("")) == "RuntimeError: (no message)"
    assert len(first_line(ValueError("y" * 1000), limit=50)) == 50


def test_truncate_answers_cuts_answers_only_and_says_so():
    long = PairwiseItem("x", "g", "q" * 50, "a" * 30, "b" * 5, "B")
    (cut,) = truncate_answers([long], 10)
    assert cut.question == "q" * 50
    assert cut.answer_a == "a" * 10 + " [... 20 more characters]"
    assert cut.answer_b == "b" * 5
    assert (cut.id, cut.group, cut.human_prefers) == ("x", "g", "B")


def test_agreement_against_hand_computed_values():
    gold = ["A", "A", "B", "B"]
    pred = ["A", "B", "B", "B"]  # 3 of 4; kappa = (0.75 - 0.5) / 0.5
    first = ["A", "B", "B", "A"]
    second = ["A", "A", "B", "A"]  # the second item flips
    a = agreement(pred, gold, first, second)
    assert a.n == 4 and a.calls == 8 and a.unparseable_calls == 0
    assert a.accuracy.value == pytest.approx(0.75)
    assert a.kappa.value == pytest.approx(0.5)
    assert a.flip.value == pytest.approx(0.25) and a.flip_n == 4
    assert a.accuracy.low <= a.accuracy.value <= a.accuracy.high


def test_a_one_order_judge_counts_unparseable_replies_as_disagreement():
    verdicts = OrderVerdicts(first=["A", None, "B", None], second=["A", "B", None, None])
    assert single_order_verdicts(verdicts.first) == ["A", UNPARSEABLE, "B", UNPARSEABLE]
    assert verdicts.failed_calls == 4
    a = order_agreement(verdicts, ["A", "A", "B", "B"])
    assert a.accuracy.value == pytest.approx(0.5)
    assert a.unparseable_calls == 4
    assert a.flip_n == 1 and a.flip.value == 0.0  # only the first item has both orders


def test_flip_rate_is_undefined_when_no_item_has_both_orders():
    a = order_agreement(OrderVerdicts(first=[None, None], second=["A", None]), ["A", "B"])
    assert a.flip_n == 0 and a.flip.value is None
    assert a.accuracy.value == 0.0


def test_held_out_flips_are_read_with_the_fitted_lean_and_without():
    # Each order leans 0.3 to whichever answer is shown first; the model still ranks
    # the preferred answer above the other in both orders.
    items = [ITEM, PairwiseItem("mtbench-008", "q-2", "2*3?", "5", "6", human_prefers="B")]
    raw = [pairwise_verdict(0.9, 0.6, 0.0, 0.5), pairwise_verdict(0.6, 0.9, 0.0, 0.5)]
    fit = Fit(lean=position_lean(raw), threshold=0.5, val_kappa=0.0)
    a = heldout_agreement(raw, fit, items)
    assert a.raw_flip is not None and a.raw_flip.value == 1.0  # each order picks the first
    assert a.flip.value == 0.0  # with the lean off, either order picks the preferred one
    assert a.accuracy.value == 1.0


def test_the_served_model_is_the_judge_model_the_benchmark_reads(tmp_path):
    """MLflow's arm judges with the same checkpoint as flywheel's: the server is started on
    it (here a folder with no checkpoint, which the server names as it exits)."""
    empty = tmp_path / "no-model"
    empty.mkdir()
    with pytest.raises(RuntimeError, match="the server exited"):
        with served_model(free_port(), tmp_path / "server.log", str(empty)):
            pass
    said = (tmp_path / "server.log").read_text().replace("\n", "")  # wrapped by the console
    assert f"model_path={empty} (of lm, judge_lm or reflection;" in said and "config.json" in said
