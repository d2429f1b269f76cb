"""A label on a whole Langfuse session trains and gates the judge: it is read onto the
session's last turn, which the judge reads after the conversation before it."""

from __future__ import annotations

import json

from flows.night.collect import collect
from infra.agents.intent_router import IntentRouter
from infra.scales import ScoreScale
from infra.traces.jsonl import JsonlTraceSource
from judges.align import align
from tests.fakes import ScriptedLM


def conversation(n: int, day: str) -> list[dict]:
    """A two-turn session: the user asks for a room on `day`, and at ten the agent books
    Tuesday. Its last turn reads the same in every session."""
    turns = [(f"I need a room for {day}.", "Which time?"), ("At ten, please.", "Booked Tuesday.")]
    return [
        {
            "id": f"o{n}-{k}",
            "traceId": f"t{n}-{k}",
            "sessionId": f"s{n}",
            "type": "GENERATION",
            "startTime": f"2025-03-02T{n % 24:02d}:0{k}:00Z",
            "input": [{"role": "user", "content": said}],
            "output": reply,
        }
        for k, (said, reply) in enumerate(turns)
    ]


def session_label(n: int, passed: bool) -> dict:
    return {
        "id": f"score-{n}",
        "sessionId": f"s{n}",
        "name": "correct",
        "value": float(passed),
        "dataType": "BOOLEAN",
        "source": "ANNOTATION",
        "timestamp": "2025-03-03T09:00:00Z",
        "comment": "" if passed else "booked the wrong day",
    }


def reads_the_conversation(messages: list[dict]) -> float:
    """A judge that passes a booking only where the room was asked for on Tuesday."""
    return 0.9 if "room for Tuesday" in messages[-1]["content"] else 0.1


async def test_a_session_label_trains_and_gates_the_judge(tmp_path):
    days = ["Tuesday" if n % 2 else "Monday" for n in range(30)]
    observations = [o for n, day in enumerate(days) for o in conversation(n, day)]
    labels = [session_label(n, day == "Tuesday") for n, day in enumerate(days)]
    (tmp_path / "observations.jsonl").write_text("\n".join(map(json.dumps, observations)))
    (tmp_path / "scores.jsonl").write_text("\n".join(map(json.dumps, labels)))

    batch = JsonlTraceSource(tmp_path).fetch(since=None, limit=1000)
    items = collect(batch, IntentRouter(), "correct").items
    assert sorted(i.id for i in items) == sorted(f"t{n}-1" for n in range(30))  # last turns
    # the last turns alike: only the conversation before them tells a pass from a fail
    assert len({(i.input_text.split("This turn:")[1], i.output_text) for i in items}) == 1
    assert all(i.input_text.startswith("Earlier in this conversation:\nuser: ") for i in items)

    async def no_reflection(prompt: str) -> str:
        raise AssertionError("nothing is searched")

    aligned = await align(
        ScriptedLM(p_first=reads_the_conversation),
        {"rubric": "Judge the booking."},
        ScoreScale("boolean"),
        items[:10],
        items[10:20],
        items[20:],
        None,
        no_reflection,
    )
    assert 0.1 < aligned.judge.threshold <= 0.9  # fitted on the sessions' labels
    gated = aligned.judge.heldout
    assert gated["n"] == 10 and gated["kappa"] == 1.0  # measured on held-out sessions
    assert {v.id for v in aligned.judge.heldout_verdicts} == {i.id for i in items[20:]}
