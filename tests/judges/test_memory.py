"""The judge's memory: the reviewers' notes on the most alike labelled requests go into its
prompt after the exchange, never a note on the judged exchange's own trace; training
records are read on that prompt; the notes travel in the adapter's folder."""

import json
import random
from collections import Counter

import pytest

from judges.injection import TRAINING, planted
from judges.lora_records import pointwise_records
from judges.memory import FILE, INTRO, ReviewedMemory
from judges.pointwise import PASS_QUESTION, PointwiseJudge
from judges.types import JudgedItem
from tests.fakes import ScriptedLM

REVIEWED = [
    JudgedItem("w1", "will it rain in Paris tomorrow", "weather", True, "correct: weather"),
    JudgedItem("w2", "is it cold in Oslo", "music", False, "expected weather"),
    JudgedItem("p1", "add this song to my party playlist", "playlist", True, "correct: playlist"),
    JudgedItem("p2", "add the album to my road trip playlist", "none", False, "expected playlist"),
    JudgedItem("r1", "book a table for two at noon", "restaurant", True, "correct: restaurant"),
]
QUERY = JudgedItem("new", "add a tune to my workout playlist", "playlist")


def test_nearest_are_the_most_alike_requests_first():
    assert [i.id for i in ReviewedMemory(REVIEWED, k=2).nearest(QUERY)] == ["p1", "p2"]


def test_an_exchange_never_sees_its_own_trace_nor_its_planted_copy():
    memory = ReviewedMemory(REVIEWED, k=4)
    own = REVIEWED[2]
    copy = planted(own, TRAINING, random.Random(0))
    for item in (own, copy):
        ids = [i.id for i in memory.nearest(item)]
        assert "p1" not in ids and ids[0] == "p2" and len(ids) == 4


def test_the_judge_reads_the_notes_after_the_reply_the_most_alike_last():
    judge = PointwiseJudge(
        ScriptedLM(), {"rubric": "Be strict."}, memory=ReviewedMemory(REVIEWED, 2)
    )
    system, user = judge.messages(QUERY, PASS_QUESTION)
    assert INTRO not in system["content"]
    text = user["content"]
    assert text.index("</reply>") < text.index(INTRO) < text.index(PASS_QUESTION)
    notes = text.split(INTRO)[1]
    assert notes.index("road trip playlist") < notes.index("party playlist")
    # the verdict and comment outside the request's tags: data, then the reviewer's word
    assert "road trip playlist\n</request> fail: expected playlist" in notes
    assert "book a table" not in notes
    plain = PointwiseJudge(ScriptedLM(), {"rubric": "Be strict."})
    assert INTRO not in plain.messages(QUERY, PASS_QUESTION)[1]["content"]


def test_training_records_use_the_memory_prompt_and_stay_balanced():
    judge = PointwiseJudge(ScriptedLM(), {"rubric": "r"}, memory=ReviewedMemory(REVIEWED, 1))
    records = pointwise_records(
        "r", REVIEWED, seed=0, injections=True, messages=lambda i: judge.messages(i, PASS_QUESTION)
    )
    assert Counter(r["completion"][0]["content"] for r in records) == {"Yes": 4, "No": 4}
    for record in records:  # each reads one note, never one on its own request
        request, notes = record["prompt"][1]["content"].split(INTRO)
        asked = request.split("<request>\n")[1].split("\n")[0]
        assert notes.count("<request>") == 1 and asked not in notes


def test_the_notes_travel_in_the_adapter_folder_and_are_read_with_it(tmp_path):
    memory = ReviewedMemory(REVIEWED, 2)
    memory.save(tmp_path)
    lm = ScriptedLM()
    reloaded = PointwiseJudge(lm, {"rubric": "r"}, adapter=str(tmp_path))
    direct = PointwiseJudge(lm, {"rubric": "r"}, memory=memory)
    assert reloaded.messages(QUERY, PASS_QUESTION) == direct.messages(QUERY, PASS_QUESTION)
    assert ReviewedMemory.beside(tmp_path / "nothing-here") is None


def test_a_broken_memory_file_names_the_record_and_the_field(tmp_path):
    ReviewedMemory(REVIEWED, 2).save(tmp_path)
    saved = json.loads((tmp_path / FILE).read_text())
    del saved["reviewed"][3]["comment"]
    (tmp_path / FILE).write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"reviewed\[3\] has no field 'comment'"):
        ReviewedMemory.beside(tmp_path)


def test_an_empty_memory_or_no_notes_is_refused():
    with pytest.raises(ValueError, match="at least one exchange labelled"):
        ReviewedMemory([JudgedItem("u", "unlabelled", "reply")], k=1)
    with pytest.raises(ValueError, match="k >= 1"):
        ReviewedMemory(REVIEWED, k=0)
