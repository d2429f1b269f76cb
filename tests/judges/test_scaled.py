"""The scale-following judge: its answer set and verdict per Langfuse score kind."""

from __future__ import annotations

import math

import pytest

from infra.lm import Completion
from infra.scales import ScoreScale
from judges.parsing import Unparseable
from judges.scaled import ScaledJudge, answers
from judges.types import JudgedItem

ITEM = JudgedItem("t1", "What is 2+2?", "4")
RUBRIC = {"rubric": "Grade the reply."}


class ChoiceLM:
    """choice_logprobs from a fixed probability per answer; complete() from a fixed text."""

    def __init__(self, probs: dict[str, float] | None = None, text: str = ""):
        self.probs, self.text, self.asked = probs or {}, text, []

    async def choice_logprobs(self, messages, choices, adapter=None):
        self.asked.append(list(choices))
        return [math.log(max(self.probs.get(c, 0.0), 1e-12)) for c in choices]

    async def complete(self, messages, **params):
        return Completion(text=self.text)


def test_answer_sets_follow_the_scale():
    assert answers(ScoreScale("boolean")) == ("Yes", "No")
    assert answers(ScoreScale("categorical", categories=("bad", "ok", "good"))) == (
        "bad",
        "ok",
        "good",
    )
    assert answers(ScoreScale("numeric", minimum=1, maximum=5)) == ("1", "2", "3", "4", "5")
    assert answers(ScoreScale("numeric", minimum=0, maximum=100)) is None  # too many levels
    assert answers(ScoreScale("numeric", minimum=0.0, maximum=1.5)) is None  # continuous


async def test_boolean_reads_p_yes_against_the_threshold():
    lm = ChoiceLM({"Yes": 0.3, "No": 0.7})
    low = await ScaledJudge(lm, RUBRIC, ScoreScale("boolean"), threshold=0.25).verdict(ITEM)
    high = await ScaledJudge(lm, RUBRIC, ScoreScale("boolean"), threshold=0.5).verdict(ITEM)
    assert low.value is True and high.value is False
    assert low.margin == pytest.approx(0.4)


async def test_categorical_takes_the_most_probable_category():
    scale = ScoreScale("categorical", categories=("wrong", "partial", "right"))
    lm = ChoiceLM({"wrong": 0.2, "partial": 0.5, "right": 0.3})
    verdict = await ScaledJudge(lm, RUBRIC, scale).verdict(ITEM)
    assert verdict.value == "partial"
    assert verdict.probabilities["right"] == pytest.approx(0.3)
    assert lm.asked == [["wrong", "partial", "right"]]


async def test_numeric_is_the_probability_weighted_mean():
    scale = ScoreScale("numeric", minimum=1, maximum=3)
    lm = ChoiceLM({"1": 0.5, "2": 0.0, "3": 0.5})
    verdict = await ScaledJudge(lm, RUBRIC, scale).verdict(ITEM)
    assert verdict.value == pytest.approx(2.0)
    assert verdict.margin == pytest.approx(0.0)  # split between 1 and 3: unsure


async def test_continuous_scale_parses_text_and_reports_unparseable():
    scale = ScoreScale("numeric", minimum=0.0, maximum=1.5)
    ok = await ScaledJudge(ChoiceLM(text="Score: 0.75\nRationale: close."), RUBRIC, scale).verdict(
        ITEM
    )
    assert ok.value == pytest.approx(0.75)
    bad = await ScaledJudge(ChoiceLM(text="It is fine."), RUBRIC, scale).verdict(ITEM)
    assert isinstance(bad, Unparseable)
