"""The memory judge: the reviewed exchanges most alike go into its prompt with their
verdicts, never one from the judged exchange's own trace; its training records are read on
that prompt."""

import random
from collections import Counter

import pytest

from benchmarks.judge_memory import INTRO, MemoryJudge, ReviewedMemory
from judges.injection import TRAINING, planted
from judges.lora_records import pointwise_records
from judges.pointwise import PASS_QUESTION
from judges.types import JudgedItem
from tests.fakes import ScriptedLM

REVIEWED = [
    JudgedItem("w1", "will it rain in Paris tomorrow", "weather", True, "correct: weather"),
    JudgedItem("w2", "is it cold in Oslo", "music", False, "expected weather"),
    JudgedItem("p1", "add this song to my party playlist", "playlist", True, "correct: playlist"),
    JudgedItem("p2", "add the album to my road trip playlist", "none", False, "expected playlist"),
    JudgedItem("r1", "book a table for two at noon", "restaurant", True, "correct: restaurant"),
]


def test_nearest_are_the_most_alike_requests_first():
    memory = ReviewedMemory(REVIEWED, k=2)
    query = JudgedItem("new", "add a tune to my workout playlist", "playlist")
    assert [i.id for i in memory.nearest(query, 2)] == ["p1", "p2"]


def test_an_exchange_never_sees_its_own_trace_nor_its_planted_copy():
    memory = ReviewedMemory(REVIEWED, k=2)
    own = REVIEWED[2]
    copy = planted(own, TRAINING, random.Random(0))
    for item in (own, copy):
        ids = [i.id for i in memory.nearest(item, 4)]
        assert "p1" not in ids and ids[0] == "p2" and len(ids) == 4


def test_the_judge_reads_its_examples_with_verdicts_and_comments_after_its_rubric():
    judge = MemoryJudge(ScriptedLM(), "Be strict.", ReviewedMemory(REVIEWED, k=2))
    item = JudgedItem("new", "add a tune to my workout playlist", "playlist")
    system, user = judge.messages(item, PASS_QUESTION)
    assert system["content"].startswith("Be strict.") and INTRO in system["content"]
    shots = system["content"].split(INTRO)[1]
    # the most alike last, nearest the exchange; the verdict and comment outside the tags
    assert shots.index("party playlist") > shots.index("road trip playlist")
    assert "Verdict: fail. The reviewer wrote: expected playlist" in shots
    assert "book a table" not in shots
    assert user["content"].endswith(PASS_QUESTION) and "workout playlist" in user["content"]


def test_training_records_use_the_memory_prompt_and_stay_balanced():
    judge = MemoryJudge(ScriptedLM(), "Be strict.", ReviewedMemory(REVIEWED, k=1))
    records = pointwise_records(
        "Be strict.",
        REVIEWED,
        seed=0,
        injections=True,
        messages=lambda item: judge.messages(item, PASS_QUESTION),
    )
    assert Counter(r["completion"][0]["content"] for r in records) == {"Yes": 4, "No": 4}
    assert all(INTRO in r["prompt"][0]["content"] for r in records)
    for record in records:  # no record is shown its own verdict
        request = record["prompt"][1]["content"].split("<request>\n")[1].split("\n")[0]
        assert request not in record["prompt"][0]["content"]


def test_an_empty_memory_is_refused():
    with pytest.raises(ValueError, match="at least one labelled exchange"):
        ReviewedMemory([], k=1)
