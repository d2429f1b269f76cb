"""Build the sample "production" export in traces/: 80 booking requests through agent.py.

The requests come from templates (booking_requests.py, fixed seed); each runs through the
agent's tool loop with the seed prompt in prompts.py, on flywheel's embedded model,
offline, with greedy decoding, the tools answering from the offline calendar. Every
generation, tool call and result is recorded as Langfuse's OpenAI integration records it:
a generation's input is `{"messages", "tools"}`, a reply that calls tools carries
`tool_calls`, each tool is a TOOL observation. The "human" annotations on 60% of the
traces are a stand-in: pass when the calendar confirmed a booking on the day (and time)
asked (`annotation_source = gold_label_proxy`).

Run (about 7 minutes on 2 CPU cores):  .venv/bin/python examples/tool_agent/build_traces.py
"""

from __future__ import annotations

import asyncio
import random
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from infra.lm.factory import make_lm
from infra.settings import LMSettings

if not __package__:  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.export_files import share, write_jsonl  # noqa: E402
from examples.tool_agent.agent import (  # noqa: E402
    PARAMS,
    Conversation,
    ModelCall,
    ToolRun,
    handle,
)
from examples.tool_agent.booking_requests import BookingRequest, generate, verdict  # noqa: E402
from examples.tool_agent.prompts import BOOK_MEETING, BOOKING_PROMPT, TOOLS  # noqa: E402

OUT = Path(__file__).resolve().parent / "traces"
COMMAND = ".venv/bin/python examples/tool_agent/build_traces.py"
SEED = 20261207
TRACES = 80
ANNOTATED_FRACTION = 0.6
ANNOTATION = "correct"
MORNING = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
MODEL = "smollm2-135m-instruct"
TAGS = ["example", "tool-agent"]


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def observations_of(trace_id: str, conversation: Conversation, start: datetime) -> list[dict]:
    """The trace's root span, then each generation and tool call in the order they ran."""
    root_id = f"obs-{trace_id[:18]}-0"
    common = {"traceId": trace_id, "parentObservationId": root_id, "tags": TAGS}
    moment = start + timedelta(milliseconds=4)
    recorded = []
    for n, event in enumerate(conversation.events, start=1):
        obs = {"id": f"obs-{trace_id[:18]}-{n}", **common, "startTime": stamp(moment)}
        if isinstance(event, ModelCall):
            usage = event.completion.usage
            moment += timedelta(milliseconds=150 + 25 * usage.completion_tokens)
            obs |= {
                "type": "GENERATION",
                "name": BOOK_MEETING,
                "input": {"messages": event.sent, "tools": TOOLS},
                "output": event.reply,
                "model": MODEL,
                "modelParameters": PARAMS,
                "promptName": BOOK_MEETING,
                "promptVersion": 1,
                "metadata": {"prompt_variables": conversation.variables},
                "usage": {
                    "input": usage.prompt_tokens,
                    "output": usage.completion_tokens,
                    "total": usage.prompt_tokens + usage.completion_tokens,
                    "unit": "TOKENS",
                },
            }
        else:
            moment += timedelta(milliseconds=12)
            obs |= {
                "type": "TOOL",
                "name": event.name,
                "input": event.arguments,
                "output": event.result,
                "metadata": {},
            }
        recorded.append(obs | {"endTime": stamp(moment)})
        moment += timedelta(milliseconds=3)
    root = {
        "id": root_id,
        "traceId": trace_id,
        "type": "SPAN",
        "name": "handle-booking",
        "input": {"request": conversation.request},
        "output": conversation.answer,
        "startTime": stamp(start),
        "endTime": stamp(moment),
        "tags": TAGS,
        "metadata": {},
    }
    return [root, *recorded]


def annotation(trace_id: str, request: BookingRequest, results: list[str], start: datetime):
    passed, comment = verdict(request, results)
    return {
        "id": f"score-{trace_id[:18]}",
        "traceId": trace_id,
        "name": ANNOTATION,
        "value": 1.0 if passed else 0.0,
        "dataType": "BOOLEAN",
        "source": "ANNOTATION",
        "comment": comment,
        "metadata": {"annotation_source": "gold_label_proxy"},
        "timestamp": stamp(start + timedelta(hours=6)),
    }


async def main() -> None:
    rng = random.Random(SEED)
    lm = make_lm(LMSettings())
    requests = generate(TRACES, rng)
    trace_ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in requests]
    conversations = await asyncio.gather(*(handle(r.text, lm) for r in requests))

    annotated = set(rng.sample(range(TRACES), round(ANNOTATED_FRACTION * TRACES)))
    observations, scores = [], []
    for n, (trace_id, request, conversation) in enumerate(
        zip(trace_ids, requests, conversations, strict=True)
    ):
        start = MORNING + timedelta(seconds=97 * n)
        observations += observations_of(trace_id, conversation, start)
        if n in annotated:
            scores.append(annotation(trace_id, request, conversation.results(), start))

    passing = [verdict(r, c.results())[0] for r, c in zip(requests, conversations, strict=True)]
    named = [p for p, r in zip(passing, requests, strict=True) if r.time is not None]
    any_time = [p for p, r in zip(passing, requests, strict=True) if r.time is None]
    figures = {
        "traces with a tool call": share([bool(c.results()) for c in conversations]),
        "traces that looked a day up (find_slot)": share([looked_up(c) for c in conversations]),
        "passing": share(passing),
        "passing where a time was named": share(named),
        "passing where any time would do": share(any_time),
    }
    write_export(observations, scores, figures)
    print(f"{TRACES} traces written ({len(observations)} observations) to {OUT}")
    print(f"{len(scores)} annotated, {sum(s['value'] for s in scores):.0f} of them passing")
    for what, figure in figures.items():
        print(f"{what}: {figure}")


def looked_up(conversation: Conversation) -> bool:
    return any(isinstance(e, ToolRun) and e.name == "find_slot" for e in conversation.events)


def write_export(observations: list[dict], scores: list[dict], figures: dict[str, str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write_jsonl(OUT / "observations.jsonl", observations)
    write_jsonl(OUT / "scores.jsonl", scores)
    prompt = {
        "name": BOOK_MEETING,
        "version": 1,
        "type": "chat",
        "prompt": BOOKING_PROMPT,
        "labels": ["production", "latest"],
        "config": {},
        "tags": [],
        "commitMessage": None,
    }
    write_jsonl(OUT / "prompts.jsonl", [prompt])
    results = "".join(f"- {what}: {figure}\n" for what, figure in figures.items())
    (OUT / "README.md").write_text(README.format(command=COMMAND, results=results))


README = """\
# Sample production traces of the booking agent

A Langfuse JSONL export of 80 traces of `../agent.py`, a calendar-booking agent that
calls tools. The requests are generated from templates (`../booking_requests.py`, fixed
seed): no dataset is used.

- `observations.jsonl`: per trace a root span `handle-booking`, then in order each
  generation of the CHAT prompt `book-meeting` (input `{{"messages", "tools"}}`, output the
  assistant's message with its `tool_calls`, the prompt's variables in
  `metadata.prompt_variables`) and each tool call (`find_slot`, `book`: TOOL observations,
  input the arguments, output the result). A generation after a tool call was sent the
  prompt's messages, the assistant's calls and one `tool` turn per result.
- `scores.jsonl`: a stand-in for human annotation on 60% of the traces: `correct`
  (BOOLEAN, ANNOTATION) is 1 when the calendar confirmed a booking on the day asked, at the
  time asked if one was named (`metadata.annotation_source = gold_label_proxy`).
- `prompts.jsonl`: the prompt's version 1 (labelled production), Langfuse's API shape.

Built offline with flywheel's embedded model (SmolLM2-135M-Instruct, greedy), the seed
prompt in `../prompts.py` and the calendar in `../calendar_tools.py`, from the repository
root:

    {command}

Measured on these traces:

{results}"""


if __name__ == "__main__":
    asyncio.run(main())
