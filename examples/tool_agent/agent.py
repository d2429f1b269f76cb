"""A calendar-booking agent that calls tools, its instructions kept in Langfuse.

One CHAT prompt, `book-meeting` (prompts.py), is rendered with the user's request and
sent to the model with two tools (find_slot, book). While the model answers with tool
calls, each call runs against the offline calendar (calendar_tools.py) and its result goes
back to the model as a `tool` turn; the first reply without a call is the answer.

In production this loop would call the model through Langfuse's OpenAI integration,
which records each generation as `{"messages": [...], "tools": [...]}` with the reply's
`tool_calls`, and each tool as a TOOL observation. build_traces.py records the same
shapes from this loop run on flywheel's embedded model, so `agent = "replay"` can rerun
the loop on a candidate prompt with no code of yours.

Run one request (offline, embedded model):
    .venv/bin/python -m examples.tool_agent.agent "Book me a meeting on Tuesday at 14:00."
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any

from langfuse.model import TemplateParser

from examples.tool_agent.calendar_tools import run_tool
from examples.tool_agent.prompts import BOOKING_PROMPT, TOOLS
from infra.lm import LM
from infra.lm.protocol import Completion

MAX_ROUNDS = 3  # model calls per request: look up, book, answer
PARAMS = {"max_tokens": 64, "temperature": 0}

Message = dict[str, Any]


@dataclass
class ModelCall:
    """One generation: the chat sent, what came back, and the assistant turn it made."""

    sent: list[Message]
    completion: Completion
    reply: Message


@dataclass
class ToolRun:
    """One tool call the agent ran, and what the tool returned."""

    name: str
    arguments: dict[str, Any]
    result: str


@dataclass
class Conversation:
    """Everything one request made happen, in order, and the final answer."""

    request: str
    variables: dict[str, str]
    events: list[ModelCall | ToolRun] = field(default_factory=list)
    answer: str = ""

    def results(self) -> list[str]:
        return [e.result for e in self.events if isinstance(e, ToolRun)]


def render(prompt: list[Message], variables: dict[str, str]) -> list[Message]:
    """What Langfuse's `prompt.compile(**variables)` gives for a chat prompt."""
    return [
        {"role": m["role"], "content": TemplateParser.compile_template(m["content"], variables)}
        for m in prompt
    ]


async def handle(request: str, lm: LM, prompt: list[Message] = BOOKING_PROMPT) -> Conversation:
    variables = {"request": request}
    conversation = Conversation(request, variables)
    chat = render(prompt, variables)
    for round_ in range(MAX_ROUNDS):
        completion = await lm.complete(chat, tools=TOOLS, **PARAMS)
        text = completion.text.strip()
        if not completion.tool_calls:
            reply = {"role": "assistant", "content": text}
            conversation.events.append(ModelCall(list(chat), completion, reply))
            conversation.answer = text
            return conversation
        # ids unique in the whole conversation, as OpenAI's are: a later round's chat
        # holds the earlier rounds' calls too
        calls = [
            c.openai(0) | {"id": f"call_{round_}_{i}"} for i, c in enumerate(completion.tool_calls)
        ]
        reply = {"role": "assistant", "content": text or None, "tool_calls": calls}
        conversation.events.append(ModelCall(list(chat), completion, reply))
        chat.append(reply)
        for call, entry in zip(completion.tool_calls, calls, strict=True):
            result = run_tool(call.name, dict(call.arguments))
            conversation.events.append(ToolRun(call.name, dict(call.arguments), result))
            chat.append({"role": "tool", "tool_call_id": entry["id"], "content": result})
    # out of rounds while still calling tools: the last call is all the user gets
    conversation.answer = text
    return conversation


async def main(request: str) -> None:
    from infra.lm.factory import make_lm
    from infra.settings import LMSettings

    conversation = await handle(request, make_lm(LMSettings()))
    for event in conversation.events:
        if isinstance(event, ToolRun):
            print(f"  {event.name}({event.arguments}) -> {event.result}")
        else:
            print(f"model: {event.reply}")
    print(conversation.answer)


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Book me a meeting on Tuesday at 14:00."))
