"""The agent's metric reads people's right replies before the judge, and only there."""

import pytest

from infra.agents.intent_router import IntentRouter
from infra.types import Example
from judges.agent_metric import AgentJudgeAdapter
from judges.labelled_metric import LabelledMetric, labelled_metric
from judges.pointwise import PointwiseJudge
from judges.types import JudgedItem
from tests.fakes import ScriptedLM


def judge_lm() -> ScriptedLM:
    """Answers 'weather' to any request; its judge passes every reply (p 0.9)."""

    def reply(messages):
        if "In one sentence" in messages[-1]["content"]:
            return "The judge's own reason."
        return "weather"

    return ScriptedLM(reply=reply, p_first=lambda m: 0.9)


async def test_a_labelled_trace_is_scored_by_its_right_reply_and_the_rest_by_the_judge():
    lm = judge_lm()
    judge = PointwiseJudge(lm, {"rubric": "r"}, threshold=0.5)
    metric = labelled_metric(IntentRouter(), judge, {"t1": "music", "t2": "weather"})
    assert isinstance(metric, LabelledMetric)
    adapter = AgentJudgeAdapter(IntentRouter(), lm, metric)
    batch = [Example(t, {"request": "play something"}) for t in ("t1", "t2", "t3")]
    scored = await adapter.evaluate(batch, {"instructions": "Route.", "examples": ""}, True)
    # t1: people said music, the agent said weather; t2: right; t3: nobody said, judged
    assert scored.scores == pytest.approx([0.0, 1.0, 0.9])
    judge_reads = lm.choice_calls  # one verdict read: t3
    assert len(judge_reads) == 1 and metric.by_labels == 2
    dataset = await adapter.make_reflective_dataset(
        {"instructions": "Route."}, scored, ["instructions"]
    )
    feedback = [r["Feedback"] for r in dataset["instructions"]]
    assert "failed" in feedback[0] and "people said it is: music" in feedback[0]
    assert "passed" in feedback[1] and "people said it is: weather" in feedback[1]
    assert "The judge's own reason." in feedback[2]


def test_an_agent_that_cannot_compare_replies_keeps_the_judge():
    judge = PointwiseJudge(judge_lm(), {"rubric": "r"})
    assert labelled_metric(object(), judge, {"t1": "music"}) is judge
    assert labelled_metric(IntentRouter(), judge, {}) is judge


async def test_a_right_reply_the_agent_cannot_read_is_judged():
    lm = judge_lm()
    metric = LabelledMetric(
        PointwiseJudge(lm, {"rubric": "r"}), {"t1": "no label here"}, IntentRouter().target_score
    )
    assert await metric.p_pass_many([JudgedItem("t1", "q", "weather")]) == pytest.approx([0.9])
    assert metric.by_labels == 0
