"""A judge's model call that fails for good is no verdict: left out and counted."""

from __future__ import annotations

import pytest

from gepa_opt import CallFailed, EvaluationBatch
from infra.agents.intent_router import IntentRouter
from infra.lm import ModelCallFailed
from infra.types import Example
from judges.agent_metric import AgentJudgeAdapter
from judges.calls import NO_REASON
from judges.feedback import judge_traces
from judges.judge import Judge
from judges.pass_fail_fit import JudgeAlignmentAdapter, heldout_agreement
from judges.pointwise import PointwiseJudge
from judges.types import JudgedItem
from tests.fakes import ScriptedLM


class FailingLM(ScriptedLM):
    """Fails every call whose text holds `poison`, like a server answering 500 for good."""

    def __init__(self, poison: str, **kwargs):
        super().__init__(**kwargs)
        self.poison = poison

    def _check(self, messages) -> None:
        if any(self.poison in m["content"] for m in messages):
            raise ModelCallFailed("server_error", "HTTP 500")

    async def complete(self, messages, **params):
        self._check(messages)
        return await super().complete(messages, **params)

    async def choice_logprobs(self, messages, choices, adapter=None):
        self._check(messages)
        return await super().choice_logprobs(messages, choices, adapter)


def item(i: int, passed: bool, text: str = "fine") -> JudgedItem:
    return JudgedItem(f"t{i}", f"request {i}", text, human_pass=passed)


async def test_pointwise_leaves_the_failed_items_out_and_counts_them():
    judge = PointwiseJudge(FailingLM("POISON", p_first=lambda m: 0.8), {"rubric": "r"})
    probs = await judge.p_pass_many([item(0, True), item(1, True, "POISON"), item(2, False)])
    assert probs == [pytest.approx(0.8), None, pytest.approx(0.8)]
    assert judge.failed == 1


async def test_neither_answer_weighing_anything_is_a_failed_call_not_one_half():
    class Silent(ScriptedLM):
        async def choice_logprobs(self, messages, choices, adapter=None):
            return [float("-inf")] * len(choices)

    with pytest.raises(ModelCallFailed, match="both 0"):
        await PointwiseJudge(Silent(), {"rubric": "r"}).p_pass(item(0, True))


async def test_agreement_is_over_the_judged_items_only():
    # the judge passes everything; the poisoned item is the only "fail" label, and would
    # count as a disagreement if it were scored at all
    lm = FailingLM("POISON", p_first=lambda m: 0.9)
    items = [item(i, True) for i in range(6)] + [item(6, False, "POISON"), item(7, False)]
    report, verdicts = await heldout_agreement(lm, {"rubric": "r"}, 0.5, items, seed=0)
    assert report["failed"] == 1.0 and report["n"] == 7.0
    assert [v.id for v in verdicts] == [i.id for i in items if i.output_text != "POISON"]
    assert report["accuracy"] == pytest.approx(6 / 7)


async def test_night_verdicts_name_the_traces_left_without_a_score():
    lm = FailingLM("POISON", p_first=lambda m: 0.7, reply=lambda m: "Because.")
    judge = Judge({"rubric": "r"}, threshold=0.5)
    items = [item(0, True), item(1, True, "POISON")]
    verdicts = await judge_traces(lm, judge, items, set(), with_rationales=True)
    assert set(verdicts.scores) == {"t0"} and verdicts.failed == ["t1"]
    assert verdicts.rationales == {"t0": "Because."}


async def test_gepa_adapters_raise_call_failed_so_gepa_tries_again_and_never_scores_it():
    lm = FailingLM("POISON", p_first=lambda m: 0.6, reply=lambda m: "weather")
    adapter = JudgeAlignmentAdapter(lm, {True: 1.0, False: 1.0})
    with pytest.raises(CallFailed):
        await adapter.evaluate([item(1, True, "POISON")], {"rubric": "r"})
    agent = AgentJudgeAdapter(IntentRouter(), lm, PointwiseJudge(lm, {"rubric": "r"}))
    with pytest.raises(CallFailed):  # the agent's own call fails
        await agent.evaluate([Example("e", {"request": "POISON"})], {"instructions": "x"})


async def test_a_missing_rationale_is_said_in_the_feedback_not_invented():
    lm = FailingLM("In one sentence", p_first=lambda m: 0.6, reply=lambda m: "weather")
    agent = AgentJudgeAdapter(IntentRouter(), lm, PointwiseJudge(lm, {"rubric": "r"}))
    candidate = {"instructions": "x", "examples": ""}
    batch: EvaluationBatch = await agent.evaluate(
        [Example("e", {"request": "rain?"})], candidate, capture_traces=True
    )
    dataset = await agent.make_reflective_dataset(candidate, batch, ["instructions"])
    assert NO_REASON in dataset["instructions"][0]["Feedback"]
