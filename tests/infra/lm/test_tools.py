"""Tool definitions in, tool calls out: parsing a reply's calls, writing a tool-calling
chat for a template that reads `tools` and for one that does not."""

from __future__ import annotations

import json

import pytest

from infra.lm.tools import (
    ToolCall,
    call_from,
    check_tools,
    for_template,
    parse_tool_calls,
    template_reads_tools,
    with_tools_described,
)
from tests.tool_chats import FIND, booked

CALLED = booked("Monday", "c1")[:3]  # ask, call, result


def test_a_reply_with_calls_gives_its_calls_and_the_text_around_them():
    text = (
        'Let me look.\n<tool_call>{"name": "find_slot", "arguments": {"day": "Monday"}}'
        '</tool_call>\n<tool_call>{"name": "book", "arguments": "{\\"at\\": \\"10:00\\"}"}'
        "</tool_call>"
    )
    said, calls = parse_tool_calls(text)
    assert said == "Let me look."
    assert calls == [ToolCall("find_slot", {"day": "Monday"}), ToolCall("book", {"at": "10:00"})]
    assert [c.arguments for c in calls] == [{"day": "Monday"}, {"at": "10:00"}]


@pytest.mark.parametrize(
    "text",
    [
        "No tools needed: it is Monday.",
        '<tool_call>{"name": "find_slot", "arguments": {"day": </tool_call>',  # broken JSON
        '<tool_call>{"arguments": {"day": "Monday"}}</tool_call>',  # no name
        '<tool_call>{"name": "find_slot", "arguments": ["Monday"]}</tool_call>',  # not an object
    ],
)
def test_a_reply_without_a_readable_call_stays_as_written(text):
    assert parse_tool_calls(text) == (text, [])


def test_a_call_cut_short_by_max_tokens_after_its_json_is_still_read():
    said, calls = parse_tool_calls('<tool_call>{"name": "find_slot", "arguments": {}}')
    assert said == "" and calls == [ToolCall("find_slot", {})]


def test_calls_with_the_same_arguments_in_another_order_or_spacing_have_one_key():
    a = ToolCall("book", {"day": "Monday", "at": "10:00"}, id="c1")
    b = call_from({"function": {"name": "book", "arguments": '{"at":"10:00",  "day":"Monday"}'}})
    assert b is not None and a.key() == b.key() and a != ToolCall("book", {"day": "Tuesday"})


def test_a_call_goes_back_to_openais_shape_with_arguments_as_a_json_string():
    call = ToolCall("find_slot", {"day": "Monday"})
    entry = call.openai(2)
    assert entry["id"] == "call_2" and entry["type"] == "function"
    assert json.loads(entry["function"]["arguments"]) == {"day": "Monday"}
    assert call_from(entry) == ToolCall("find_slot", {"day": "Monday"}, id="call_2")


def test_a_template_without_tools_gets_calls_written_out_and_tools_described():
    chat = with_tools_described(for_template(CALLED, native=False), [FIND])
    assert chat[0]["role"] == "system" and '"find_slot"' in chat[0]["content"]
    assert "<tool_call>" in chat[0]["content"]  # how to call one
    assert chat[2] == {
        "role": "assistant",
        "content": '<tool_call>{"name": "find_slot", "arguments": {"day": "Monday"}}</tool_call>',
    }
    assert chat[3]["role"] == "tool" and chat[3]["content"] == "10:00 free"
    # a system turn of its own keeps its text first
    own = with_tools_described([{"role": "system", "content": "Be brief."}, *CALLED], [FIND])
    assert own[0]["content"].startswith("Be brief.\n\n") and len(own) == len(CALLED) + 1


def test_a_template_that_reads_tools_gets_the_arguments_as_a_dict():
    chat = for_template(CALLED, native=True)
    assert chat[1]["content"] == ""
    assert chat[1]["tool_calls"][0]["function"]["arguments"] == {"day": "Monday"}
    assert template_reads_tools("{% if tools %}{{ tools | tojson }}{% endif %}")
    assert not template_reads_tools("{{ message['content'] }} toolsmith")
    assert not template_reads_tools(None)


@pytest.mark.parametrize(
    "tools,field",
    [
        ([{"type": "function"}], "tools[0]: needs function.name"),
        (
            [FIND, {"function": {"name": "x", "parameters": "day"}}],
            "tools[1] x: function.parameters",
        ),
    ],
)
def test_a_tool_definition_without_what_it_needs_is_named(tools, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        check_tools(tools)
