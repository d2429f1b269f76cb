"""Must-pass cases: read from a file or a Langfuse dataset, each bad line named; each
check decides on the reply; one failure refuses a candidate whatever its gain."""

from __future__ import annotations

import json

import pytest

from flows.production.gate import decide
from flows.production.must_pass import (
    CaseResult,
    MustPassCase,
    cases_from_dataset,
    judge_case,
    read_cases,
    run_cases,
)
from infra.agents.intent_router import IntentRouter
from infra.agents.replay import ReplayAgent
from infra.traces.source import TraceSourceError
from infra.types import Example
from tests.fakes import ScriptedLM
from tests.flows.production.test_gate import CFG, evidence
from tests.infra.agents.test_tool_replay import PROMPTS, tool_trace

CASES = [
    {"id": "jazz", "inputs": {"request": "play some jazz"}, "expected": "PlayMusic"},
    {"id": "polite", "inputs": {"request": "rain tomorrow?"}, "contains": "weather"},
    {"id": "one-word", "inputs": {"request": "rate this book"}, "regex": r"^\w+$"},
    {
        "id": "json",
        "inputs": {"request": "as JSON"},
        "json_schema": {"type": "object", "required": ["intent"]},
    },
    {"id": "kind", "inputs": {"request": "book a table"}, "judge": "Names a restaurant."},
]


def write(tmp_path, lines: list) -> object:
    path = tmp_path / "must_pass.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    return path


def test_a_case_file_is_read_with_one_check_per_case(tmp_path):
    cases = read_cases(write(tmp_path, CASES), IntentRouter())
    assert [(c.id, c.check) for c in cases] == [
        ("jazz", "expected"),
        ("polite", "contains"),
        ("one-word", "regex"),
        ("json", "json_schema"),
        ("kind", "judge"),
    ]
    assert cases[0].example.inputs == {"request": "play some jazz"}


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("{not json", r"must_pass.jsonl:2: not valid JSON"),
        ({"inputs": {"request": "x"}, "contains": "y"}, r":2: field id:"),
        ({"id": "a", "inputs": {"request": "x"}}, r":2: field check: case a: exactly one of"),
        ({"id": "a", "inputs": {}, "contains": "y", "regex": "z"}, r"field check"),
        ({"id": "a", "inputs": {"request": "x"}, "regex": "("}, r"field regex: not a valid"),
        ({"id": "a", "inputs": {"request": "x"}, "json_schema": {"type": 3}}, r"field json_schema"),
        ({"id": "a", "contains": "y"}, r"field inputs: case a: `inputs`"),
    ],
)
def test_a_bad_case_is_named_by_line_and_field(tmp_path, line, named):
    path = write(tmp_path, [CASES[0], line])
    with pytest.raises(TraceSourceError, match=named):
        read_cases(path, IntentRouter())


def case(check: str, value, inputs=None) -> MustPassCase:
    return MustPassCase("c1", Example("c1", inputs or {"request": "r"}), check, value)


async def never_asked(text, example, reply):
    raise AssertionError("only a judge check asks the judge")


@pytest.mark.parametrize(
    ("check", "value", "reply", "passed"),
    [
        ("expected", "PlayMusic", "That is music.", True),  # the agent's own reading
        ("expected", "PlayMusic", "weather", False),
        ("contains", "weather", "It is about the weather.", True),
        ("contains", "weather", "music", False),
        ("regex", r"^\w+$", "music", True),
        ("regex", r"^\w+$", "it is music", False),
        ("json_schema", {"type": "object", "required": ["intent"]}, '{"intent": "x"}', True),
        ("json_schema", {"type": "object", "required": ["intent"]}, '{"kind": "x"}', False),
        ("json_schema", {"type": "object"}, "not json", False),
    ],
)
async def test_each_check_decides_on_the_reply(check, value, reply, passed):
    result = await judge_case(case(check, value), reply, IntentRouter(), never_asked)
    assert result.passed is passed and result.output == reply


async def test_expected_without_the_agents_reading_is_the_same_reply_spacing_aside():
    agent = ReplayAgent(PROMPTS)  # a trace has no reading of its own: None
    ok = await judge_case(
        case("expected", "Booked  Tuesday."), "Booked Tuesday.", agent, never_asked
    )
    off = await judge_case(case("expected", "Booked Tuesday."), "Booked.", agent, never_asked)
    assert ok.passed and not off.passed


async def test_a_judge_check_asks_the_judge_with_the_criterion():
    asked = []

    async def criterion(text, example, reply):
        asked.append((text, example.id, reply))
        return None  # its call failed for good

    result = await judge_case(
        case("judge", "Names a restaurant."), "food", IntentRouter(), criterion
    )
    assert asked == [("Names a restaurant.", "c1", "food")]
    assert not result.passed and "the judge's call failed" in result.why


def test_a_better_average_that_fails_one_case_is_refused_naming_it():
    better = evidence([1.0] * 30, [1.0] * 20 + [0.0] * 10)
    assert decide(better, CFG).passed
    results = [
        CaseResult("jazz", True, "music", "expected 'PlayMusic'"),
        CaseResult("refund", False, "No refunds, ever.", "does not contain 'refund form'"),
    ]
    decision = decide(better, CFG, must_pass=results)
    assert not decision.passed and decision.gain == pytest.approx(10 / 30)
    assert "must-pass case refund failed (does not contain 'refund form')" in decision.reason
    assert "'No refunds, ever.'" in decision.reason and "jazz" not in decision.reason
    assert decide(better, CFG, must_pass=results[:1]).passed


async def test_the_candidate_runs_every_case_with_its_prompts(tmp_path):
    cases = read_cases(write(tmp_path, CASES[:3]), IntentRouter())
    lm = ScriptedLM(lambda m: "music" if "jazz" in m[-1]["content"] else "rating, I think")
    results = await run_cases(IntentRouter(), lm, lm, {"instructions": "Route."}, cases)
    assert [(r.id, r.passed) for r in results] == [
        ("jazz", True),
        ("polite", False),
        ("one-word", False),
    ]
    assert all(call[0]["content"] == "Route." for call in lm.calls)


async def test_a_replayed_agents_case_carries_its_trace(tmp_path):
    line = {"id": "tue", "trace": tool_trace("t9", "Tuesday", "10:00 free"), "contains": "10:00"}
    (read,) = read_cases(write(tmp_path, [line]), ReplayAgent(PROMPTS))
    assert read.example.id == "tue" and read.example.inputs == {"request": "Book me Tuesday."}

    def books(messages: list[dict]) -> str:
        if messages[-1]["role"] == "tool":
            return f"Booked {messages[-1]['content']}."
        return '<tool_call>{"name": "find_slot", "arguments": {"day": "Tuesday"}}</tool_call>'

    agent = ReplayAgent(PROMPTS)
    (result,) = await run_cases(
        agent, ScriptedLM(books), ScriptedLM(), agent.seed_prompts(), [read]
    )
    assert result.passed and result.output == "Booked 10:00 free."


def test_a_datasets_items_are_cases_by_expected_output_or_a_named_check():
    items = [
        Example("i1", {"request": "play jazz"}, "PlayMusic"),
        Example("i2", {"request": "x"}, None, {"check": {"regex": "^y"}}),
    ]
    cases = cases_from_dataset("regressions", items)
    assert [(c.check, c.value) for c in cases] == [("expected", "PlayMusic"), ("regex", "^y")]
    with pytest.raises(TraceSourceError, match=r"dataset 'regressions' item i3: field"):
        cases_from_dataset("regressions", [Example("i3", {"request": "x"})])
