"""Replaying a tool-calling agent from its traces: the loop runs again on the candidate's
prompt, a call equal to a recorded one gets its recorded result, another is looked up in
other traces, simulated by a function the user registered, or stops the trajectory; no
tool is ever called that the user did not name."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from infra.agents.replay import ReplayAgent
from infra.agents.tool_policy import load_tool_functions
from infra.settings import Settings
from infra.traces.managed_prompts import managed_prompt_from_langfuse
from tests.fakes import ScriptedLM
from tests.infra.agents.test_replay import records
from tests.tool_chats import FIND

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
BOOKER = managed_prompt_from_langfuse(
    {
        "name": "booker",
        "version": 2,
        "type": "chat",
        "prompt": [
            {"role": "system", "content": "Book what the user asks; look slots up first."},
            {"role": "user", "content": "{{request}}"},
        ],
        "labels": ["production"],
    }
)
PROMPTS = {"booker": BOOKER}


def call(day: str, call_id: str) -> dict:
    arguments = json.dumps({"day": day})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "find_slot", "arguments": arguments},
    }


def tool_trace(trace: str, day: str, result: str) -> list[dict]:
    """As Langfuse's OpenAI integration records a booking: the generation offered the
    tool and called it, the tool's span, the generation that read its result."""
    asked = BOOKER.render(BOOKER.text, {"request": f"Book me {day}."})
    called = {"role": "assistant", "content": None, "tool_calls": [call(day, "c1")]}
    answered = {"role": "tool", "tool_call_id": "c1", "content": result}

    def generation(n: int, sent: list[dict], output: dict) -> dict:
        return {
            "id": f"{trace}-{n}",
            "traceId": trace,
            "type": "GENERATION",
            "name": "booker",
            "startTime": (T0 + timedelta(seconds=n)).isoformat(),
            "promptName": "booker",
            "promptVersion": 2,
            "input": {"messages": sent, "tools": [FIND]},
            "output": output,
        }

    tool = {
        "id": f"{trace}-1",
        "traceId": trace,
        "type": "TOOL",
        "name": "find_slot",
        "startTime": (T0 + timedelta(seconds=1)).isoformat(),
        "input": {"day": day},
        "output": result,
    }
    return [
        generation(0, asked, called),
        tool,
        generation(
            2,
            [*asked, called, answered],
            {"role": "assistant", "content": f"Booked {day}, {result}."},
        ),
    ]


def agent_model(day_asked: str):
    """Calls find_slot for `day_asked`, then books the slot the tool gave; with a
    planted defect in its instructions it never calls the tool."""

    def reply(messages: list[dict]) -> str:
        if "DEFECT" in messages[0]["content"]:
            return "Booked, I guess."
        if messages[-1]["role"] == "tool":
            return f"Booked: {messages[-1]['content']}"
        body = json.dumps({"name": "find_slot", "arguments": {"day": day_asked}})
        return f"<tool_call>{body}</tool_call>"

    return reply


def example(agent: ReplayAgent, trace: str, day: str, result: str):
    (record,) = records(tool_trace(trace, day, result))
    return agent.example_from_trace(record)


def test_a_tool_loop_is_planned_as_one_step_with_its_recorded_result():
    agent = ReplayAgent(PROMPTS)
    (record,) = records(tool_trace("t1", "Tuesday", "10:00 free"))
    plan = agent.plan(record)
    assert plan.order == (0,) and plan.loops == {0: 0, 1: 0, 2: 0}
    assert plan.steps[0].tools == (FIND,) and plan.steps[2].turns  # the tool turns after
    (key,) = plan.results
    assert key[0] == "find_slot" and json.loads(key[1]) == {"day": "Tuesday"}
    assert plan.results[key] == "10:00 free"
    assert agent.example_from_trace(record).inputs == {"request": "Book me Tuesday."}


async def test_the_same_call_reuses_the_recorded_result_and_the_loop_goes_on():
    agent = ReplayAgent(PROMPTS)
    lm = ScriptedLM(agent_model("Tuesday"))
    rollout = await agent.run(
        example(agent, "t1", "Tuesday", "10:00 free"), {"booker": "Book it."}, lm
    )
    assert rollout.output == "Booked: 10:00 free"
    assert rollout.tool_steps == {"reused": 1}
    assert [s.name for s in rollout.steps] == ["booker", "find_slot", "booker"]
    first, second = lm.calls
    assert first[0] == {"role": "system", "content": "Book it."}  # the candidate's text
    assert second[-2]["tool_calls"][0]["function"]["name"] == "find_slot"
    assert second[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "10:00 free"}


async def test_another_call_is_looked_up_in_other_traces_then_simulated_then_stops():
    looked_up = ReplayAgent(PROMPTS)
    example(looked_up, "t2", "Wednesday", "14:00 free")  # planned: its result is known
    wednesday = ScriptedLM(agent_model("Wednesday"))
    rollout = await looked_up.run(
        example(looked_up, "t1", "Tuesday", "10:00 free"), {"booker": "x"}, wednesday
    )
    assert rollout.tool_steps == {"looked_up": 1} and rollout.output == "Booked: 14:00 free"

    asked: list[dict] = []

    def find_slot(arguments: dict) -> dict:
        asked.append(arguments)
        return {"free": ["09:30"]}

    simulated = ReplayAgent(PROMPTS, tool_functions={"find_slot": find_slot})
    rollout = await simulated.run(
        example(simulated, "t1", "Tuesday", "10:00 free"), {"booker": "x"}, wednesday
    )
    assert asked == [{"day": "Wednesday"}] and rollout.tool_steps == {"simulated": 1}
    assert rollout.output == 'Booked: {"free": ["09:30"]}'

    stopped = ReplayAgent(PROMPTS, tool_functions={"book_room": find_slot})
    rollout = await stopped.run(
        example(stopped, "t1", "Tuesday", "10:00 free"), {"booker": "x"}, wednesday
    )
    assert rollout.tool_steps == {"stopped": 1} and len(asked) == 1  # no other tool called
    # the trajectory ends at the call, which is what the judge sees
    assert rollout.output.startswith("<tool_call>") and "Wednesday" in rollout.output
    assert [s.name for s in rollout.steps] == ["booker"]


async def test_a_reply_without_a_call_ends_the_loop_and_is_judged():
    agent = ReplayAgent(PROMPTS)
    lm = ScriptedLM(agent_model("Tuesday"))
    rollout = await agent.run(
        example(agent, "t1", "Tuesday", "10:00 free"), {"booker": "DEFECT"}, lm
    )
    assert rollout.output == "Booked, I guess." and rollout.tool_steps == {}
    assert len(lm.calls) == 1


async def test_a_model_that_never_stops_calling_ends_after_the_recorded_rounds_and_two():
    agent = ReplayAgent(PROMPTS)
    lm = ScriptedLM(
        lambda m: '<tool_call>{"name": "find_slot", "arguments": {"day": "Tuesday"}}</tool_call>'
    )
    rollout = await agent.run(example(agent, "t1", "Tuesday", "10:00 free"), {"booker": "x"}, lm)
    assert len(lm.calls) == 2 + 2 and rollout.tool_steps == {"reused": 4}
    assert rollout.output.startswith("<tool_call>")


def test_a_trace_recorded_as_json_strings_reads_the_same():
    observations = tool_trace("t1", "Tuesday", "10:00 free")
    for o in observations:
        o["input"], o["output"] = json.dumps(o["input"]), json.dumps(o["output"])
    (record,) = records(observations)
    generation = record.steps[0]
    assert generation.tools == [FIND] and generation.tool_calls[0]["id"] == "c1"
    assert record.steps[2].turns[-1] == {
        "role": "tool",
        "content": "10:00 free",
        "tool_call_id": "c1",
    }
    assert ReplayAgent(PROMPTS).plan(record).results


@pytest.mark.parametrize("entry", ["no_colon", "json:nothing_here", "tests.tool_chats:FIND"])
def test_a_tool_function_that_cannot_be_loaded_is_named(entry):

    with pytest.raises(ValueError, match="replay.tool_functions.find_slot"):
        load_tool_functions({"find_slot": entry})


def stand_in(arguments: dict) -> str:
    """An offline find_slot, as a team would register it."""
    return f"{arguments['day']}: 11:00 free"


def test_the_settings_name_the_stand_ins_by_tool():

    named = {"find_slot": "tests.infra.agents.test_tool_replay:stand_in"}
    settings = Settings(replay={"tool_functions": named})
    functions = load_tool_functions(settings.replay.tool_functions)
    assert functions["find_slot"]({"day": "Friday"}) == "Friday: 11:00 free"
