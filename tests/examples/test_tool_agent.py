"""The booking example's own logic, with no model: the offline calendar its tools (and the
replay's stand-ins) answer from, its tool loop, and the stand-in annotator."""

from __future__ import annotations

import json
import random

from examples.tool_agent.agent import MAX_ROUNDS, ModelCall, ToolRun, handle
from examples.tool_agent.booking_requests import generate, verdict
from examples.tool_agent.calendar_tools import CALENDAR, book, find_slot, run_tool
from examples.tool_agent.prompts import BOOKING_PROMPT, SYSTEM, TOOLS
from infra.agents.tool_policy import load_tool_functions
from tests.fakes import ScriptedLM


def written(name: str, **arguments: str) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_the_calendar_lists_free_times_and_books_only_a_free_one():
    assert find_slot({"day": "tuesday"}) == "Free on Tuesday: 10:00, 14:00."
    assert book({"day": "Tuesday", "time": "14:00"}) == "Booked Tuesday at 14:00."
    assert book({"day": " Friday ", "time": "10:00"}) == "Booked Friday at 10:00."
    assert book({"day": "Monday", "time": "9:00"}) == "Booked Monday at 09:00."  # same slot
    taken = book({"day": "Tuesday", "time": "09:00"})
    assert taken == "Not booked: 09:00 is not free on Tuesday. Free: 10:00, 14:00."
    assert book({"day": "Thursday", "time": "Thursday"}).startswith("Not booked")
    assert book({"day": "Sunday", "time": "10:00"}).startswith("Not booked: no such day")
    assert find_slot({}).startswith("No such day")
    # a booking takes nothing away: the tools are functions of their arguments alone
    assert find_slot({"day": "Tuesday"}) == "Free on Tuesday: 10:00, 14:00."


def test_an_unknown_tool_answers_so_and_the_stand_ins_load_by_their_settings_names():
    assert run_tool("cancel", {}) == "No such tool: 'cancel'. Tools: find_slot, book."
    functions = load_tool_functions(
        {
            "find_slot": "examples.tool_agent.calendar_tools:find_slot",
            "book": "examples.tool_agent.calendar_tools:book",
        }
    )
    assert functions["book"]({"day": "Monday", "time": "15:00"}) == "Booked Monday at 15:00."


async def test_the_loop_feeds_each_result_back_until_the_model_answers():
    def model(messages: list[dict]) -> str:
        last = messages[-1]
        if last["role"] == "user":
            return written("find_slot", day="Wednesday")
        if last["content"].startswith("Free on"):
            return written("book", day="Wednesday", time="13:00")
        return "Your meeting is booked on Wednesday at 13:00."

    lm = ScriptedLM(model)
    conversation = await handle("Book me anything on Wednesday.", lm)
    assert conversation.answer == "Your meeting is booked on Wednesday at 13:00."
    assert conversation.results() == [
        "Free on Wednesday: 09:00, 13:00, 16:00.",
        "Booked Wednesday at 13:00.",
    ]
    kinds = [type(e) for e in conversation.events]
    assert kinds == [ModelCall, ToolRun, ModelCall, ToolRun, ModelCall]
    first, _, second, _, third = conversation.events
    assert first.sent[0] == {"role": "system", "content": SYSTEM}
    assert first.sent[-1] == {"role": "user", "content": "Book me anything on Wednesday."}
    assert len(first.sent) == len(BOOKING_PROMPT)
    # the second call was sent the first's calls and their result, ids unique across rounds
    called, answered = second.sent[-2:]
    assert called["tool_calls"][0]["function"]["name"] == "find_slot"
    assert answered == {
        "role": "tool",
        "tool_call_id": called["tool_calls"][0]["id"],
        "content": "Free on Wednesday: 09:00, 13:00, 16:00.",
    }
    assert third.sent[-2]["tool_calls"][0]["id"] != called["tool_calls"][0]["id"]
    assert third.reply == {"role": "assistant", "content": conversation.answer}
    assert all(call[: len(BOOKING_PROMPT)] == first.sent for call in lm.calls)


async def test_a_model_that_keeps_calling_is_stopped_after_the_last_round():
    lm = ScriptedLM(lambda m: written("find_slot", day="Monday"))
    conversation = await handle("Book Monday.", lm)
    assert len(lm.calls) == MAX_ROUNDS and len(conversation.results()) == MAX_ROUNDS
    assert conversation.answer == ""  # the model never said anything to the user


def test_requests_ask_for_free_times_and_the_annotator_checks_what_was_booked():
    requests = generate(40, random.Random(7))
    assert requests == generate(40, random.Random(7))
    assert {r.time is None for r in requests} == {True, False}
    for request in requests:
        assert request.day in request.text and request.day in CALENDAR
        assert request.time is None or (request.time in CALENDAR[request.day])
    timed = next(r for r in requests if r.time)
    other = next(t for t in CALENDAR[timed.day] if t != timed.time)
    assert verdict(timed, [f"Booked {timed.day} at {timed.time}."])[0]
    assert verdict(timed, [f"Booked {timed.day} at {other}."]) == (
        False,
        f"asked for {timed.day} at {timed.time}; booked {timed.day} at {other} instead",
    )
    assert not verdict(timed, [f"Not booked: 08:00 is not free on {timed.day}."])[0]
    anytime = next(r for r in requests if r.time is None)
    assert verdict(anytime, [f"Booked {anytime.day} at {CALENDAR[anytime.day][-1]}."])[0]


def test_the_tools_are_offered_in_openai_s_shape():
    assert [t["function"]["name"] for t in TOOLS] == ["find_slot", "book"]
    assert TOOLS[1]["function"]["parameters"]["required"] == ["day", "time"]
