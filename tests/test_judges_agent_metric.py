import pytest

from gepa_opt import EvaluationBatch
from infra.agents.intent_router import IntentRouter
from infra.types import Example
from judges.agent_metric import AgentJudgeAdapter
from judges.pointwise import PointwiseJudge
from tests.fakes import ScriptedLM


def fake_lm() -> ScriptedLM:
    def reply(messages):
        if "In one sentence" in messages[-1]["content"]:
            return "It names the wrong intent."
        return "weather" if "forecast" in messages[0]["content"] else "no idea"

    return ScriptedLM(
        reply=reply, p_first=lambda m: 0.9 if "Reply:\nweather" in m[1]["content"] else 0.1
    )


async def test_agent_scores_are_judge_probabilities_and_feedback_has_rationale():
    lm = fake_lm()
    adapter = AgentJudgeAdapter(
        IntentRouter(), lm, PointwiseJudge(lm, {"rubric": "r"}, threshold=0.5)
    )
    batch = [Example("e1", {"request": "rain tomorrow?"}), Example("e2", {"request": "sun?"})]
    good = {"instructions": "Answer with the forecast label.", "examples": ""}
    bad = {"instructions": "Answer.", "examples": ""}
    scored = await adapter.evaluate(batch, good, capture_traces=True)
    assert scored.scores == pytest.approx([0.9, 0.9]) and scored.outputs == ["weather", "weather"]
    failing = await adapter.evaluate(batch, bad, capture_traces=True)
    assert failing.scores == pytest.approx([0.1, 0.1])
    dataset = await adapter.make_reflective_dataset(bad, failing, ["instructions"])
    record = dataset["instructions"][0]
    assert record["Inputs"] == "rain tomorrow?" and record["Generated Outputs"] == "no idea"
    assert "failed" in record["Feedback"] and "wrong intent" in record["Feedback"]


async def test_no_traces_means_no_rationale_calls():
    lm = fake_lm()
    adapter = AgentJudgeAdapter(IntentRouter(), lm, PointwiseJudge(lm, {"rubric": "r"}))
    result = await adapter.evaluate([Example("e1", {"request": "x"})], {"instructions": "i"})
    assert isinstance(result, EvaluationBatch) and result.trajectories is None
    assert not any("In one sentence" in m[-1]["content"] for m in lm.calls)
