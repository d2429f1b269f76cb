from datetime import UTC, datetime

import pytest

from infra.agents import load_agent
from infra.agents.intent_router import example_messages, parse_intent
from infra.traces import RecordError, TraceRecord


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
