"""A chat prompt's message placeholders: read back from each recorded chat and filled again
when it is replayed; one every call filled alike (few-shot turns) is a component the
optimizer rewrites, one filled per call (a conversation's history) stays the call's data."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from gepa_opt import GEPAConfig, optimize
from infra.agents.placeholder_components import as_messages, as_text, placeholder_of
from infra.agents.replay import ReplayAgent, fixed_placeholders
from infra.traces.managed_prompts import infer_variables, managed_prompt_from_langfuse, match_chat
from judges.agent_metric import AgentJudgeAdapter
from tests.fakes import ScriptedLM
from tests.infra.agents.test_replay import records

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
BOOKER = managed_prompt_from_langfuse(
    {
        "name": "booker",
        "version": 3,
        "type": "chat",
        "prompt": [
            {"role": "system", "content": "Book what the user asks."},
            {"type": "placeholder", "name": "examples"},
            {"type": "placeholder", "name": "history"},
            {"role": "user", "content": "{{request}}"},
        ],
        "labels": ["production"],
    }
)
PROMPTS = {"booker": BOOKER}
EXAMPLES = [
    {"role": "user", "content": "Book Monday at 9."},
    {"role": "assistant", "content": "WRONG: booked Sunday."},  # a planted defect
]
COMPONENT = "booker.placeholders.examples"


def sent(request: str, history: list[dict]) -> list[dict]:
    return BOOKER.render(
        BOOKER.text, {"request": request}, {"examples": EXAMPLES, "history": history}
    )


def trace(n: int, history: list[dict]) -> list[dict]:
    """One call of the booking prompt, as Langfuse records it: its examples, the talk so
    far, the request."""
    return [
        {
            "id": f"o{n}",
            "traceId": f"t{n}",
            "type": "GENERATION",
            "name": "booker",
            "startTime": (T0 + timedelta(minutes=n)).isoformat(),
            "promptName": "booker",
            "promptVersion": 3,
            "input": sent(f"Book day {n}.", history),
            "output": "Booked Sunday.",
        }
    ]


HISTORY = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]


def test_a_placeholder_is_filled_on_render_and_read_back_from_a_recorded_chat():
    assert BOOKER.placeholders() == ["examples", "history"] and BOOKER.variables() == ["request"]
    chat = sent("Book Tuesday.", HISTORY)
    assert [m["content"] for m in chat] == [
        "Book what the user asks.",
        "Book Monday at 9.",
        "WRONG: booked Sunday.",
        "Hi",
        "Hello!",
        "Book Tuesday.",
    ]
    match = match_chat(BOOKER, chat, known={"examples": EXAMPLES})
    assert match is not None and match.used == len(chat)
    assert match.variables == {"request": "Book Tuesday."}
    assert match.fills == {"examples": EXAMPLES, "history": HISTORY}
    # side by side, one chat cannot tell whose the turns are: the later takes them
    alone = match_chat(BOOKER, chat)
    assert alone is not None and alone.fills == {"examples": [], "history": EXAMPLES + HISTORY}
    assert infer_variables(BOOKER, chat) == {"request": "Book Tuesday."}
    assert match_chat(BOOKER, [{"role": "user", "content": "no system"}]) is None


def test_a_transcript_reads_back_as_its_messages():
    assert as_messages(as_text(EXAMPLES)) == EXAMPLES
    assert as_messages("Just say yes.") == [{"role": "user", "content": "Just say yes."}]
    assert placeholder_of(COMPONENT) == ("booker", "examples") and placeholder_of("booker") is None


def test_a_fixed_placeholder_is_a_component_and_a_history_is_data():
    traces = records([o for n in range(3) for o in trace(n, HISTORY[: 2 * (n % 2)])])
    fixed = fixed_placeholders(traces, PROMPTS)
    assert fixed == {"booker": {"examples": EXAMPLES}}  # history differs per call
    agent = ReplayAgent(PROMPTS, placeholders=fixed)
    assert agent.seed_prompts() == {"booker": BOOKER.text, COMPONENT: as_text(EXAMPLES)}


async def test_a_replay_sends_the_candidates_examples_and_each_calls_own_history():
    traces = records(trace(1, HISTORY) + trace(2, []))
    agent = ReplayAgent(PROMPTS, placeholders=fixed_placeholders(traces, PROMPTS))
    lm = ScriptedLM(lambda m: "ok")
    candidate = agent.seed_prompts() | {
        COMPONENT: "user: Book Friday.\n\nassistant: Booked Friday."
    }
    await agent.run(agent.example_from_trace(traces[0]), candidate, lm)
    assert [m["content"] for m in lm.calls[0]] == [
        "Book what the user asks.",
        "Book Friday.",
        "Booked Friday.",
        "Hi",
        "Hello!",
        "Book day 1.",
    ]


class BookingJudge:
    """Passes a reply that books the day asked for."""

    async def p_pass_many(self, items):
        return [0.0 if "Sunday" in item.output_text else 1.0 for item in items]

    async def rationale(self, item):
        return "It booked Sunday, as its example did." if "Sunday" in item.output_text else "Fine."

    async def choice_probabilities(self, item, question, choices):
        return [1.0 / len(choices)] * len(choices)

    def passes(self, score: float) -> bool:
        return score >= 0.5


def copies_its_example(messages: list[dict]) -> str:
    """A small model that books what its worked example booked."""
    return "Booked Sunday." if "Sunday" in messages[2]["content"] else "Booked the day asked."


def test_a_defect_planted_in_few_shot_turns_is_what_the_optimizer_rewrites():
    traces = records([o for n in range(6) for o in trace(n, [])])
    agent = ReplayAgent(PROMPTS, placeholders=fixed_placeholders(traces, PROMPTS))
    examples = [agent.example_from_trace(t) for t in traces]
    seed = agent.seed_prompts()

    async def reflection(prompt: str) -> str:
        current = prompt.split("```")[1].strip()
        return f"```\n{current.replace('WRONG: booked Sunday.', 'Booked Monday 9:00.')}\n```"

    adapter = AgentJudgeAdapter(agent, ScriptedLM(copies_its_example), BookingJudge())
    config = GEPAConfig(max_metric_calls=40, reflection_minibatch_size=3, seed=1)
    result = asyncio.run(optimize(seed, examples, examples, adapter, reflection, config))
    best = result.best_candidate
    assert "Sunday" not in best[COMPONENT] and "Booked Monday 9:00." in best[COMPONENT]
    assert as_messages(best[COMPONENT])[1]["role"] == "assistant"
    assert result.val_aggregate_scores[result.best_idx] == 1.0
    assert result.val_aggregate_scores[0] == 0.0
