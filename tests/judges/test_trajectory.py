"""The judge reads a multi-step run whole, a trace as logged the same way as its replay,
and says which step failed first: the component the optimizer then works on."""

from __future__ import annotations

import json

import pytest

from flows.night.collect import collect
from gepa_opt import EvaluationBatch
from infra.agents.replay import ReplayAgent, recorded_steps, recorded_tools
from infra.traces.source import TraceBatch
from infra.types import Example, Rollout, Step
from judges.agent_metric import AgentJudgeAdapter, judged_item
from judges.pointwise import PointwiseJudge
from judges.trajectory import judged_request, recorded_request, trajectory_text
from judges.types import JudgedItem
from tests.fakes import ScriptedLM
from tests.infra.agents.test_replay import _label, records
from tests.infra.agents.test_tool_replay import PROMPTS, tool_trace

DESCRIBED = "booker.tools.find_slot"


def as_recorded(messages: list[dict]) -> str:
    """The booking agent as it ran when its trace was logged: looks Tuesday up, then
    books the slot the tool gave."""
    if messages[-1]["role"] == "tool":
        return f"Booked Tuesday, {messages[-1]['content']}."
    body = json.dumps({"name": "find_slot", "arguments": {"day": "Tuesday"}})
    return f"<tool_call>{body}</tool_call>"


def booking(agent: ReplayAgent, trace: str = "t1") -> Example:
    (record,) = records(tool_trace(trace, "Tuesday", "10:00 free"))
    return agent.example_from_trace(record)


def agent() -> ReplayAgent:
    return ReplayAgent(PROMPTS, tools=recorded_tools(records(tool_trace("t1", "Tuesday", "x"))))


async def test_a_trace_as_logged_reads_as_its_replay_on_the_prompts_it_ran():
    replayed = agent()
    example = booking(replayed)
    rollout = await replayed.run(example, replayed.seed_prompts(), ScriptedLM(as_recorded))
    assert rollout.output == "Booked Tuesday, 10:00 free."
    request = recorded_request(example)
    assert judged_item(rollout).input_text == request
    assert request.startswith("Book me Tuesday.\n\nSteps:\n1. booker said: ")
    assert '"day": "Tuesday"' in request.splitlines()[3]  # the call and its arguments
    assert "2. find_slot (a tool) returned: 10:00 free" in request
    assert request.endswith("3. booker gave the reply below.")


async def test_a_candidate_that_calls_the_tool_otherwise_reads_otherwise():
    replayed = agent()
    example = booking(replayed)
    (monday_trace,) = records(tool_trace("t2", "Monday", "9:00 free"))
    replayed.example_from_trace(monday_trace)  # Monday's result, recorded in another trace

    def monday(messages: list[dict]) -> str:
        if messages[-1]["role"] == "tool":
            return "Booked Monday."
        return '<tool_call>{"name": "find_slot", "arguments": {"day": "Monday"}}</tool_call>'

    rollout = await replayed.run(example, replayed.seed_prompts(), ScriptedLM(monday))
    read = judged_item(rollout).input_text
    assert read != recorded_request(example) and '"day": "Monday"' in read
    assert "2. find_slot (a tool) returned: 9:00 free" in read


def test_a_run_of_one_call_reads_as_its_request_alone():
    example = Example("e1", {"request": "play jazz"})
    one = [Step("reply", "reply", [{"role": "user", "content": "play jazz"}], "ok")]
    assert trajectory_text(one) == "" and judged_request(example, one) == "play jazz"
    assert recorded_steps(example) == [] and recorded_request(example) == "play jazz"


def test_a_labelled_trace_is_judged_with_its_steps_as_its_replays_are():
    traces = records(tool_trace("t1", "Tuesday", "10:00 free"))
    replayed = agent()
    collected = collect(TraceBatch(traces, [_label("t1")]), replayed, "correct")
    (item,) = collected.items
    assert item.input_text == recorded_request(booking(replayed))
    assert "2. find_slot (a tool) returned: 10:00 free" in item.input_text
    assert collected.judged_items()[0].input_text == item.input_text


class Verdicts:
    """Fails every reply; asked which step failed, answers `probabilities`."""

    def __init__(self, probabilities: dict[str, float]):
        self.probabilities, self.asked = probabilities, []

    async def p_pass_many(self, items):
        return [0.0 for _ in items]

    async def rationale(self, item):
        return "The reply is wrong."

    async def choice_probabilities(self, item: JudgedItem, question: str, choices: list[str]):
        self.asked.append((item, question, choices))
        return [self.probabilities.get(c, 0.0) for c in choices]

    def passes(self, score: float) -> bool:
        return score >= 0.5


def failed(steps: list[Step], prompts: dict[str, str]) -> EvaluationBatch:
    rollout = Rollout(Example("e1", {"request": "r"}), prompts, "bad", [], 0.0, steps=steps)
    return EvaluationBatch(outputs=["bad"], scores=[0.0], trajectories=[rollout])


CHAT = [{"role": "user", "content": "r"}]


async def test_blame_is_the_judges_answer_to_which_step_failed_first():
    judge = Verdicts({"1": 0.7, "2": 0.1, "3": 0.2})
    adapter = AgentJudgeAdapter(agent(), ScriptedLM(), judge)
    steps = [
        Step("booker", "booker", CHAT, "call"),
        Step("find_slot", DESCRIBED, [], "10:00"),
        Step("booker", "booker", CHAT, "bad"),
    ]
    prompts = {"booker": "B", DESCRIBED: "D"}
    blame = await adapter.blame(prompts, failed(steps, prompts))
    assert blame == pytest.approx({"booker": 0.9, DESCRIBED: 0.1})
    (item, question, choices) = judge.asked[0]
    assert choices == ["1", "2", "3"] and "Which step went wrong first?" in question
    assert "2. find_slot (a tool) returned: 10:00" in item.input_text


async def test_a_tool_never_called_is_a_choice_and_its_description_takes_the_blame():
    judge = Verdicts({"find_slot": 0.8, "1": 0.2})
    adapter = AgentJudgeAdapter(agent(), ScriptedLM(), judge)
    prompts = {"booker": "B", DESCRIBED: "D"}
    blame = await adapter.blame(prompts, failed([Step("booker", "booker", CHAT, "bad")], prompts))
    assert blame == {DESCRIBED: 0.8, "booker": 0.2}
    assert judge.asked[0][2] == ["1", "find_slot"] and "find_slot" in judge.asked[0][1]


async def test_a_recorded_step_takes_no_blame_and_one_call_with_no_tool_asks_nothing():
    judge = Verdicts({"1": 1.0})
    adapter = AgentJudgeAdapter(agent(), ScriptedLM(), judge)
    fixed = [Step("lookup", None, CHAT, "x"), Step("reply", "reply", CHAT, "bad")]
    assert await adapter.blame({"reply": "R"}, failed(fixed, {"reply": "R"})) == {"reply": 0.0}
    judge.asked.clear()
    one = [Step("reply", "reply", CHAT, "bad")]
    assert await adapter.blame({"reply": "R"}, failed(one, {"reply": "R"})) == {}
    assert judge.asked == []


async def test_the_pointwise_judge_reads_its_choice_from_token_probabilities():
    lm = ScriptedLM(p_first=lambda m: 0.8)
    judge = PointwiseJudge(lm, {"rubric": "Judge."})
    item = JudgedItem("e1", "r\n\nSteps:\n1. a said: x\n2. b gave the reply below.", "bad")
    probs = await judge.choice_probabilities(item, "Which step went wrong first?", ["1", "2"])
    assert abs(probs[0] - 0.8) < 1e-6 and abs(sum(probs) - 1.0) < 1e-9
    assert lm.choice_calls[0][-1]["content"].endswith("Which step went wrong first?")
