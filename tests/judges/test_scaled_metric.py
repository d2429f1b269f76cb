"""A judge on any scale as the agent's metric: its verdicts placed in [0, 1]."""

from __future__ import annotations

import math

import pytest

from infra.agents.intent_router import IntentRouter
from infra.lm import Completion
from infra.scales import ScoreScale
from infra.types import Example
from judges.agent_metric import AgentJudgeAdapter
from judges.scaled import ScaledJudge
from judges.scaled_metric import ScaledMetric, UnrankedScale, placed_score, ranking_problem
from judges.types import JudgedItem

ITEM = JudgedItem("t1", "What is 2+2?", "4")
RUBRIC = {"rubric": "Grade the reply."}


class ChoiceLM:
    """choice_logprobs from a fixed probability per answer; complete() from a fixed text."""

    def __init__(self, probs: dict[str, float] | None = None, text: str = ""):
        self.probs, self.text = probs or {}, text

    async def choice_logprobs(self, messages, choices, adapter=None):
        return [math.log(max(self.probs.get(c, 0.0), 1e-12)) for c in choices]

    async def complete(self, messages, **params):
        return Completion(text=self.text)


async def scores(scale: ScoreScale, lm: ChoiceLM, **judge) -> list[float]:
    return await ScaledMetric(ScaledJudge(lm, RUBRIC, scale, **judge)).p_pass_many([ITEM])


async def test_each_scale_is_placed_on_its_order():
    boolean = ScoreScale("boolean")
    assert await scores(boolean, ChoiceLM({"Yes": 0.3, "No": 0.7})) == pytest.approx([0.3])
    stars = ScoreScale("numeric", minimum=1, maximum=5)
    assert await scores(stars, ChoiceLM({"4": 1.0})) == pytest.approx([0.75])
    assert await scores(stars, ChoiceLM({"1": 0.5, "5": 0.5})) == pytest.approx([0.5])
    valued = ScoreScale("categorical", ("bad", "ok", "good"), values=(0, 5, 10))
    lm = ChoiceLM({"bad": 0.2, "ok": 0.5, "good": 0.3})
    assert await scores(valued, lm) == pytest.approx([0.55])  # (0.2*0 + 0.5*5 + 0.3*10) / 10
    ranked = ScoreScale("categorical", ("low", "mid", "high"), ordinal=True)
    assert await scores(ranked, ChoiceLM({"low": 0.5, "high": 0.5})) == pytest.approx([0.5])
    assert await scores(ranked, ChoiceLM({"high": 1.0})) == pytest.approx([1.0])


async def test_the_pass_cut_is_half_way_or_the_boolean_threshold():
    stars = ScaledMetric(
        ScaledJudge(ChoiceLM(), RUBRIC, ScoreScale("numeric", minimum=1, maximum=5))
    )
    assert stars.passes(0.5) and not stars.passes(0.49)
    boolean = ScaledMetric(ScaledJudge(ChoiceLM(), RUBRIC, ScoreScale("boolean"), threshold=0.25))
    assert boolean.passes(0.3)


async def test_a_written_verdict_is_placed_and_an_unreadable_one_scores_zero_counted():
    continuous = ScoreScale("numeric", minimum=0.0, maximum=1.5)
    written = ScaledMetric(ScaledJudge(ChoiceLM(text="Score: 0.75"), RUBRIC, continuous))
    [(verdict, score)] = await written.judged([ITEM])
    assert score == pytest.approx(0.5) and written.margin(verdict, score) == pytest.approx(0.0)
    unreadable = ScaledMetric(ScaledJudge(ChoiceLM(text="Fine."), RUBRIC, continuous))
    [(verdict, score)] = await unreadable.judged([ITEM])
    assert score == 0.0 and unreadable.unparseable == 1
    assert unreadable.margin(verdict, score) == 0.0  # least sure: a label teaches it most


async def test_a_probability_verdict_keeps_its_own_margin():
    metric = ScaledMetric(
        ScaledJudge(
            ChoiceLM({"ok": 0.6, "bad": 0.3, "good": 0.1}),
            RUBRIC,
            ScoreScale("categorical", ("bad", "ok", "good"), (0, 1, 2)),
        )
    )
    [(verdict, score)] = await metric.judged([ITEM])
    assert metric.margin(verdict, score) == pytest.approx(0.3)


def test_a_scale_with_no_better_or_worse_is_refused_with_the_fix():
    nominal = ScoreScale("categorical", ("red", "blue"), name="colour")
    assert ranking_problem(nominal) == (
        "The score 'colour' has categories with no better or worse (red, blue), so the judge "
        "cannot tell the agent which reply is better: give the categories distinct numeric "
        "values in its Langfuse score config, or set judge.ordinal_categories = true if they "
        "are listed worst to best."
    )
    with pytest.raises(UnrankedScale, match="'colour'"):
        ScaledMetric(ScaledJudge(ChoiceLM(), RUBRIC, nominal))
    for numeric in (ScoreScale("numeric"), ScoreScale("numeric", minimum=1, maximum=1)):
        assert "numeric without a range" in ranking_problem(numeric)
    flat = ScoreScale("categorical", ("a", "b"), values=(1, 1))
    assert ranking_problem(flat) is not None
    assert ranking_problem(ScoreScale("categorical", ("a", "b"), (1, 1), ordinal=True)) is None


async def test_it_scores_the_agents_rollouts():
    lm = ChoiceLM({"4": 1.0}, text="weather")
    metric = ScaledMetric(ScaledJudge(lm, RUBRIC, ScoreScale("numeric", minimum=1, maximum=5)))
    adapter = AgentJudgeAdapter(IntentRouter(), lm, metric)
    batch = await adapter.evaluate([Example("e1", {"request": "rain?"})], {"instructions": "i"})
    assert batch.scores == pytest.approx([0.75])
    assert await metric.rationale(ITEM) == "weather"


def test_a_person_s_label_is_placed_where_the_judge_saying_it_would_be():
    ranked = ScoreScale("categorical", categories=("bad", "ok", "good"), ordinal=True)
    assert placed_score(ranked, "ok", {}) == 0.5  # as the answer "ok" alone
    assert placed_score(ranked, "ok", {"bad": 0.5, "ok": 0.0, "good": 0.5}) == 0.5
    assert placed_score(ranked, "good", {"bad": 0.0, "ok": 0.5, "good": 0.5}) == 0.75
    assert placed_score(ScoreScale("numeric", minimum=1, maximum=5), 2.0, {}) == 0.25
    assert placed_score(ScoreScale("boolean"), True, {}) == 1.0
    unranked = ScoreScale("categorical", categories=("billing", "travel"))
    assert placed_score(unranked, "travel", {}) is None  # no order to place it on
