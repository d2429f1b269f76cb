from datetime import UTC, datetime

import pytest

from infra.agents import load_agent
from infra.agents.intent_router import example_messages, parse_intent
from infra.traces import RecordError, TraceRecord
from infra.types import Example


def test_parse_intent_takes_first_label_word():
    assert parse_intent("Weather, I think") == "GetWeather"
    assert parse_intent("music or playlist") == "PlayMusic"
    assert parse_intent("I can't help with that") is None
    assert parse_intent("musical") is None  # whole words only


def test_example_lines_become_turns():
    turns = example_messages("play jazz => music\nnot an example\n => empty")
    assert turns == [
        {"role": "user", "content": "play jazz"},
        {"role": "assistant", "content": "music"},
    ]


def test_agent_reads_trace_and_scores_reference():
    agent = load_agent("infra.agents.intent_router:make_agent")
    trace = TraceRecord(
        id="o1",
        trace_id="t1",
        start_time=datetime.now(UTC),
        input=[{"role": "system", "content": "x"}, {"role": "user", "content": "rain tomorrow?"}],
    )
    example = agent.example_from_trace(trace)
    assert example.inputs == {"request": "rain tomorrow?"} and example.id == "t1"
    with pytest.raises(RecordError, match="input"):
        agent.example_from_trace(TraceRecord(id="o2", trace_id="t2", start_time=datetime.now(UTC)))


def test_bad_entry_point_is_explained():
    with pytest.raises(ValueError, match="package.module:factory"):
        load_agent("nocolon")
    with pytest.raises(ValueError, match="cannot load agent"):
        load_agent("infra.agents:missing")


def test_demonstrations_are_written_and_read_back_as_turns():
    agent = load_agent("infra.agents.intent_router:make_agent")
    assert agent.demonstrations in agent.seed_prompts()
    asked = Example(id="t1", inputs={"request": "  will it\nrain in Oslo? "})
    line = agent.demonstration(asked, "Weather, I think.")
    assert line == "will it rain in Oslo? => weather"
    assert example_messages(line) == [
        {"role": "user", "content": "will it rain in Oslo?"},
        {"role": "assistant", "content": "weather"},
    ]
    messages = agent.messages(Example(id="t2", inputs={"request": "hi"}), {
        "instructions": "Route.", agent.demonstrations: line,
    })  # fmt: skip
    assert messages[1:3] == example_messages(line)


def test_a_reply_naming_no_label_or_a_request_the_line_cannot_hold_is_no_demonstration():
    agent = load_agent("infra.agents.intent_router:make_agent")
    assert agent.demonstration(Example(id="t", inputs={"request": "rain?"}), "I can't") is None
    arrow = Example(id="t", inputs={"request": "map a => b"})
    assert agent.demonstration(arrow, "search") is None
