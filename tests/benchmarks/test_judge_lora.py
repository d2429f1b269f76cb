"""The demo judge benchmark's judges with no LM: a perfect reader of the notes takes the
kind most of them say was right and compares it with the kind the reply names; the naming
rule reads the reply alone; resemblance compares the reply with the notes' replies."""

import pytest

from benchmarks.judge_baselines import (
    naming_baseline,
    notes_ceiling,
    remembered_baseline,
    resemblance,
    resemblance_baseline,
)
from benchmarks.judge_label_curve import label_curve
from judges.memory import ReviewedMemory
from judges.types import JudgedItem

NOTES = [
    JudgedItem("w1", "will it rain in Paris", "weather", True, "correct: weather"),
    JudgedItem("w2", "will it rain in Rome", "music", False, "No. expected weather; said music"),
    JudgedItem("p1", "add it to my party playlist", "playlist", True, "correct: playlist"),
    JudgedItem("p2", "add it to my gym playlist", "none", False, "No. expected playlist"),
]


def test_a_perfect_reader_agrees_where_the_notes_name_the_right_kind():
    memory = ReviewedMemory(NOTES, k=2)
    heldout = [
        JudgedItem("a", "will it rain in Oslo", "weather", True),
        JudgedItem("b", "will it rain in Lima", "music", False),
        JudgedItem("c", "add it to my road playlist", "playlist", True),
        JudgedItem("d", "add it to my car playlist", "weather", False),
    ]
    assert notes_ceiling(memory, heldout) == 1.0
    # labels the notes contradict: the reader disagrees on every one
    flipped = [JudgedItem(i.id, i.input_text, i.output_text, not i.human_pass) for i in heldout]
    assert notes_ceiling(memory, flipped) == -1.0


def test_the_naming_rule_passes_any_reply_that_names_a_kind_right_or_wrong():
    heldout = [
        JudgedItem("a", "will it rain in Oslo", "the weather is grey", True),
        JudgedItem("b", "will it rain in Lima", "temperatures are low", False),
        JudgedItem("c", "add it to my road playlist", "playlist", True),
        JudgedItem("d", "add it to my car playlist", "music", False),  # names the wrong kind
    ]
    assert naming_baseline(heldout) == 0.5  # right on a, b and c; passes d
    assert naming_baseline(heldout[:3]) == 1.0


def test_resemblance_leans_to_the_replies_people_passed_on_alike_requests():
    memory = ReviewedMemory(NOTES, k=2)
    heldout = [
        JudgedItem("a", "will it rain in Oslo", "weather", True),  # as w1, which passed
        JudgedItem("b", "will it rain in Lima", "music", False),  # as w2, which failed
        JudgedItem("c", "add it to my road playlist", "none", False),  # as p2, which failed
    ]
    a, b, c = resemblance(memory, heldout)
    assert a > 0 > b and c < 0
    # the cut is fitted on training and validation labels, then read on held-out ones
    validation = [
        JudgedItem("v1", "will it rain in Bonn", "weather", True),
        JudgedItem("v2", "add it to my gym playlist", "none", False),
    ]
    assert resemblance_baseline(NOTES, validation, heldout, k=2) == 1.0
    flipped = [JudgedItem(i.id, i.input_text, i.output_text, not i.human_pass) for i in heldout]
    assert resemblance_baseline(NOTES, validation, flipped, k=2) < 0


def test_the_resemblance_arm_leans_on_resemblance_where_the_judge_says_nothing():
    import asyncio

    from benchmarks.judge_lora import resemblance_arm
    from tests.fakes import ScriptedLM

    memory = ReviewedMemory(NOTES, k=2)
    validation = [
        JudgedItem("v1", "will it rain in Bonn", "weather", True),
        JudgedItem("v2", "add it to my gym playlist", "none", False),
    ]
    heldout = [
        JudgedItem("a", "will it rain in Oslo", "weather", True),
        JudgedItem("b", "will it rain in Lima", "music", False),
        JudgedItem("c", "add it to my road playlist", "none", False),
    ]
    silent = ScriptedLM(p_first=lambda m: 0.5)  # the same P(pass) for every exchange

    def arm(items):
        run = resemblance_arm(silent, "r", None, memory, NOTES, validation, items, 0, 0.0)
        return asyncio.run(run)

    assert arm(heldout).report["kappa"] == 1.0
    flipped = [JudgedItem(i.id, i.input_text, i.output_text, not i.human_pass) for i in heldout]
    assert arm(flipped).report["kappa"] < 0


def test_remembering_every_label_reads_each_as_held_out_and_needs_no_validation_split():
    known = NOTES + [
        JudgedItem("w3", "will it rain in Bonn", "weather", True, "correct: weather"),
        JudgedItem("p3", "add it to my road playlist", "none", False, "No. expected playlist"),
    ]
    heldout = [
        JudgedItem("a", "will it rain in Oslo", "weather", True),
        JudgedItem("b", "will it rain in Lima", "music", False),
        JudgedItem("c", "add it to my car playlist", "playlist", True),
        JudgedItem("d", "add it to my gym playlist", "none", False),
    ]
    assert remembered_baseline(known, heldout, k=2) == 1.0
    flipped = [JudgedItem(i.id, i.input_text, i.output_text, not i.human_pass) for i in heldout]
    assert remembered_baseline(known, flipped, k=2) < 0


def test_the_label_curve_draws_n_of_each_splits_labels_and_refuses_more_than_it_has():
    heldout = [
        JudgedItem("a", "will it rain in Oslo", "weather", True),
        JudgedItem("b", "will it rain in Lima", "music", False),
    ]
    seen: list[int] = []

    def splits(seed: int):
        seen.append(seed)
        return NOTES[:2], NOTES[2:], heldout

    rows = label_curve(splits, seeds=[3, 4], sizes=[2, 4], k=2)
    assert seen == [3, 4]
    assert list(rows) == ["2 labels", "4 labels", "naming rule"]
    assert rows["4 labels"] == [1.0, 1.0]  # every note known: both weather notes decide
    assert all(len(kappas) == 2 for kappas in rows.values())
    with pytest.raises(ValueError, match="split 3 has 4 labels to learn from, not 5"):
        label_curve(splits, seeds=[3], sizes=[5], k=2)
