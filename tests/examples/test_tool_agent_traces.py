"""The booking example's shipped export, read as a night reads it (no model): every trace
plans as a replayable tool loop, its recorded results are what the offline stand-ins
answer, and a call no trace recorded reaches the stand-in named in flywheel.toml."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from examples.tool_agent.calendar_tools import run_tool
from examples.tool_agent.prompts import BOOK_MEETING, SYSTEM, TOOLS
from flows.night.collect import one_record_per_trace
from infra.agents.replay import ReplayAgent
from infra.agents.tool_policy import load_tool_functions
from infra.traces.managed_prompts import read_prompt_file
from infra.traces.mapping import trace_from_observation
from tests.fakes import ScriptedLM

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool_agent"
TRACES = EXAMPLE / "traces"


@pytest.fixture(scope="module")
def records():
    lines = (TRACES / "observations.jsonl").read_text(encoding="utf-8").splitlines()
    skipped: list = []
    found = one_record_per_trace([trace_from_observation(json.loads(x)) for x in lines], skipped)
    assert skipped == []
    return found


def replay_agent() -> ReplayAgent:
    named = tomllib.loads((EXAMPLE / "flywheel.toml").read_text())["replay"]["tool_functions"]
    prompts = read_prompt_file(TRACES / "prompts.jsonl")
    return ReplayAgent(prompts, tool_functions=load_tool_functions(named))


def test_every_trace_is_a_tool_loop_of_the_production_prompt(records):
    agent = replay_agent()
    assert agent.seed_prompts() == {BOOK_MEETING: SYSTEM}
    plans = [agent.plan(record) for record in records]
    assert len(plans) == 80
    for plan in plans:
        first = plan.steps[plan.order[0]]
        assert plan.order == (0,) and first.prompt == BOOK_MEETING
        assert list(first.tools) == TOOLS and set(first.variables) == {"request"}
    with_calls = [plan for plan in plans if plan.results]
    assert len(with_calls) >= len(plans) // 2  # most traces really called a tool
    # a follow-up generation of a loop carries the calls and results it was sent
    assert any(step.turns for plan in with_calls for step in plan.steps)


def test_recorded_results_are_what_the_stand_ins_answer(records):
    agent = replay_agent()
    for record in records:
        for (name, arguments), result in agent.plan(record).results.items():
            assert run_tool(name, json.loads(arguments)) == result


async def test_a_call_no_trace_recorded_is_answered_by_the_stand_in(records):
    agent = replay_agent()
    examples = [agent.example_from_trace(record) for record in records]

    def model(messages: list[dict]) -> str:
        if messages[-1]["role"] == "tool":
            return f"Done: {messages[-1]['content']}"
        call = {"name": "book", "arguments": {"day": "Monday", "time": "07:45"}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"

    rollout = await agent.run(examples[0], {BOOK_MEETING: "Book it."}, ScriptedLM(model))
    assert rollout.tool_steps == {"simulated": 1}
    assert (
        rollout.output
        == "Done: Not booked: 07:45 is not free on Monday. Free: 09:00, 11:00, 15:00."
    )
