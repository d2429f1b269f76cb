"""The demo judge benchmark's reading of its memory: a perfect reader of the notes takes
the kind most of them say was right and compares it with the kind the reply names."""

from benchmarks.judge_lora import naming_baseline, notes_ceiling
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
