"""The judge-model probe's questions have the right answers, and its reading tells a model
that sees the word from one that reads it backwards."""

import asyncio
import re

from benchmarks.judge_label_scale import router_rows
from benchmarks.judge_model_probe import (
    FACTS,
    WORD_LIST_RUBRIC,
    judge_split,
    judged,
    kind_word_in_replies,
    names,
    read,
    rubric_exercises,
    word_alone,
    word_exercises,
)
from infra.agents.intent_router import JUDGE_RUBRIC, LABELS
from judges.judged_text import DATA_NOTE
from judges.pointwise import PASS_QUESTION
from tests.fakes import ScriptedLM


def _text_and_word(question: str) -> tuple[str, str]:
    match = re.fullmatch(
        r'Text: "(.*)"\n\nDoes the text contain the word "(\w+)"\?', question, re.S
    )
    return match.group(1), match.group(2)


def test_a_word_alone_is_yes_exactly_where_the_text_is_the_word():
    probe = word_alone()
    assert len(probe) == 49 and sum(answer for _, answer in probe) == 7
    for question, answer in probe:
        text, word = _text_and_word(question)
        assert answer == (text == word)


def test_a_reply_holds_its_kind_word_as_a_word_not_a_stem():
    assert names("rating five stars.", "rating")
    assert not names("The current book is rated 2 stars.", "rating")
    assert names("Showtimes: WEATHER today", "weather")


def test_the_probe_asks_the_annotators_check_on_the_shipped_replies():
    rows = router_rows()
    # the stand-in annotators pass only replies that say the request's kind word
    assert all(names(r["reply"], LABELS[r["intent"]]) for r in rows if r["passed"])
    probe = kind_word_in_replies(rows, 40)
    assert probe == kind_word_in_replies(rows, 40)  # one seed, one draw
    assert len(probe) == 40 and 0 < sum(answer for _, answer in probe) < 40
    for question, answer in probe:
        assert answer == names(*_text_and_word(question))


def _sees_the_word(messages) -> float:
    question = messages[-1]["content"].removesuffix(" Answer Yes or No.")
    return 0.9 if names(*_text_and_word(question)) else 0.2


def test_reading_scores_a_model_that_sees_the_word_and_one_that_reads_it_backwards():
    probe = word_alone()
    seeing = asyncio.run(read(ScriptedLM(p_first=_sees_the_word), probe))
    backwards = asyncio.run(read(ScriptedLM(p_first=lambda m: 1 - _sees_the_word(m)), probe))
    assert seeing["auc"] == 1.0 and backwards["auc"] == 0.0
    assert abs(seeing["mean P(Yes), true"] - 0.9) < 1e-6
    assert abs(seeing["mean P(Yes), false"] - 0.2) < 1e-6
    blind = asyncio.run(read(ScriptedLM(p_first=lambda m: 0.3), FACTS))
    assert blind["auc"] == 0.5 and blind["true"] == 5


TEXTS = ["play the weather song", "book a table for two", "rate this novel now"]


def _half_yes_answers(make_exercises) -> tuple[list[dict], list[str]]:
    """40 exercises from `TEXTS`, checked to be one draw per seed and half yes."""
    records = make_exercises(TEXTS, 40, seed=3)
    assert records == make_exercises(TEXTS, 40, seed=3) and len(records) == 40
    answers = [r["completion"][0]["content"] for r in records]
    assert answers.count("Yes") == answers.count("No") == 20
    return records, answers


def test_reading_exercises_are_half_yes_and_answered_right():
    records, answers = _half_yes_answers(word_exercises)
    for record, answer in zip(records, answers, strict=True):
        question = record["prompt"][0]["content"].removesuffix(" Answer Yes or No.")
        text, word = _text_and_word(question)
        assert text in TEXTS and (answer == "Yes") == names(text, word)


def _listed_words(rubric: str) -> list[str]:
    listing = re.search(r"(?:words: |one of: |says )(.*?)\. ", rubric).group(1)
    return re.split(r", | or ", listing)


def _reply(user_turn: str) -> str:
    return re.search(r"<reply>\n(.*)\n</reply>", user_turn, re.S).group(1)


def test_rubric_exercises_ask_on_the_judges_prompt_and_pass_a_reply_that_says_a_listed_word():
    records, answers = _half_yes_answers(rubric_exercises)
    for record, answer in zip(records, answers, strict=True):
        system, user = (turn["content"] for turn in record["prompt"])
        assert system.endswith(DATA_NOTE) and user.endswith(PASS_QUESTION)
        words = _listed_words(system)
        assert 1 <= len(words) <= 8
        reply = _reply(user)
        assert reply in TEXTS and (answer == "Yes") == any(names(reply, w) for w in words)


def test_judging_reads_the_routers_rubric_against_the_held_out_labels():
    rubrics = []

    def names_a_kind(messages) -> float:
        rubrics.append(messages[0]["content"])
        reply = _reply(messages[-1]["content"])
        return 0.9 if any(names(reply, word) for word in LABELS.values()) else 0.1

    split = judge_split()
    seeing = asyncio.run(judged(ScriptedLM(p_first=names_a_kind), None, "fake", split))
    assert len(rubrics) == 100 + 256 and all(r.startswith(JUDGE_RUBRIC) for r in rubrics)
    # a judge that checks for the seven words agrees as the naming rule does (0.71-0.73)
    assert seeing["n"] == 256 and 0.6 < seeing["kappa"] < 0.85 and seeing["auc"] > 0.8
    blind = asyncio.run(judged(ScriptedLM(p_first=lambda m: 0.4), None, "blind", split))
    assert blind["kappa"] == 0.0 and blind["auc"] == 0.5


def test_the_annotators_rule_as_a_made_up_rubric_lists_the_seven_words():
    assert _listed_words(WORD_LIST_RUBRIC) == list(LABELS.values())
