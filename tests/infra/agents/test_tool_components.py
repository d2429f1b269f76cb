"""Tool descriptions as components: seeded from the prompt's Langfuse config or the
traces, offered to the model as the candidate has them, credited with the tool's steps,
and rewritten by the optimizer when a planted defect is in one."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from gepa_opt import GEPAConfig, optimize
from infra.agents.prompt_config import split
from infra.agents.replay import ReplayAgent, recorded_tools
from infra.agents.tool_components import (
    component_name,
    described,
    seed_descriptions,
    tool_of,
)
from judges.agent_metric import AgentJudgeAdapter, steps_text
from tests.fakes import ScriptedLM
from tests.infra.agents.test_replay import records
from tests.infra.agents.test_tool_replay import BOOKER, PROMPTS, example, tool_trace
from tests.tool_chats import FIND

DESCRIBED = "booker.tools.find_slot"


def test_a_tool_component_is_named_for_its_prompt_and_tool_and_split_back():
    assert component_name("booker", "find_slot") == DESCRIBED
    assert tool_of(DESCRIBED) == ("booker", "find_slot") and tool_of("booker") is None
    prompts, tools = split({"booker": "B", DESCRIBED: "D", "other": "O"})
    assert prompts == {"booker": "B", "other": "O"}
    assert tools == {"booker": {"tool_descriptions": {"find_slot": "D"}}}


def test_the_seed_description_is_the_prompts_config_else_the_recorded_one():
    recorded = FIND["function"]["description"]
    assert seed_descriptions(BOOKER, [FIND]) == {DESCRIBED: recorded}
    kept = replace(BOOKER, config={"tool_descriptions": {"find_slot": "From config"}})
    assert seed_descriptions(kept, [FIND]) == {DESCRIBED: "From config"}


def test_the_candidate_description_is_offered_and_name_and_parameters_stay():
    (tool,) = described([FIND], "booker", {DESCRIBED: "Free times of one weekday"})
    assert tool["function"]["description"] == "Free times of one weekday"
    assert tool["function"]["name"] == "find_slot"
    assert tool["function"]["parameters"] == FIND["function"]["parameters"]
    assert described([FIND], "booker", {}) == [FIND]


def test_the_replayed_agent_seeds_each_tool_the_traces_offered_its_prompts():
    traces = records(tool_trace("t1", "Tuesday", "10:00 free"))
    assert recorded_tools(traces) == {"booker": [FIND]}
    agent = ReplayAgent(PROMPTS, tools=recorded_tools(traces))
    assert agent.seed_prompts() == {
        "booker": BOOKER.text,
        DESCRIBED: FIND["function"]["description"],
    }


async def test_a_rollout_offers_the_candidates_description_and_credits_the_tool_step():
    agent = ReplayAgent(PROMPTS, tools={"booker": [FIND]})
    lm = DescriptionReadingLM()
    candidate = agent.seed_prompts() | {DESCRIBED: "Free slots of a day."}
    rollout = await agent.run(example(agent, "t1", "Tuesday", "10:00 free"), candidate, lm)
    assert lm.tools[0][0]["function"]["description"] == "Free slots of a day."
    tool_step = rollout.steps[1]
    assert tool_step.name == "find_slot" and tool_step.component == DESCRIBED
    assert "find_slot (tool, described by booker.tools.find_slot)" in steps_text(rollout)


def without_a_call(messages: list[dict]) -> str:
    """Books from a looked-up slot, or apologizes where it looked none up."""
    if messages[-1]["role"] == "tool":
        return f"Booked: {messages[-1]['content']}"
    return "Sorry, I cannot look that up."  # no tools offered: nothing to call


class ToolJudge:
    """Passes a booking made from a looked-up slot; asked which step failed, it answers
    the tool that was never called."""

    async def p_pass_many(self, items):
        return [1.0 if item.output_text.startswith("Booked") else 0.0 for item in items]

    async def rationale(self, item):
        return "Fine." if item.output_text.startswith("Booked") else "It could not book."

    async def choice_probabilities(self, item, question, choices):
        assert "find_slot" in question  # the tool it may name is offered in the question
        return [float(choice == "find_slot") for choice in choices]

    def passes(self, score: float) -> bool:
        return score >= 0.5


class DescriptionReadingLM(ScriptedLM):
    """Calls the tool only when its description does not call it retired."""

    async def complete(self, messages, **params):
        tools = params.get("tools") or []
        retired = any("RETIRED" in t["function"]["description"] for t in tools)
        if tools and not retired and messages[-1]["role"] != "tool":
            body = json.dumps({"name": "find_slot", "arguments": {"day": "Tuesday"}})
            self.reply = lambda m: f"<tool_call>{body}</tool_call>"
        else:
            self.reply = without_a_call
        return await super().complete(messages, **params)


def test_a_defect_planted_in_a_tool_description_is_the_component_the_optimizer_changes():
    agent = ReplayAgent(PROMPTS, tools={"booker": [FIND]})
    examples = [example(agent, f"t{n}", "Tuesday", "10:00 free") for n in range(6)]
    seed = agent.seed_prompts() | {DESCRIBED: "RETIRED: do not use. Finds a free slot."}
    reflected_on: list[str] = []

    async def reflection(prompt: str) -> str:
        current = prompt.split("```")[1].strip()
        reflected_on.append(current)
        return f"```\n{current.replace('RETIRED: do not use. ', '')} (revised)\n```"

    adapter = AgentJudgeAdapter(agent, DescriptionReadingLM(), ToolJudge())
    config = GEPAConfig(
        max_metric_calls=40, reflection_minibatch_size=3, module_selection="blamed", seed=1
    )
    result = asyncio.run(optimize(seed, examples, examples, adapter, reflection, config))
    best = result.best_candidate
    assert best["booker"] == seed["booker"]  # the sound prompt is left alone
    assert "RETIRED" not in best[DESCRIBED]
    assert result.val_aggregate_scores[result.best_idx] > result.val_aggregate_scores[0]
    assert reflected_on and all("Finds a free slot" in text for text in reflected_on)
