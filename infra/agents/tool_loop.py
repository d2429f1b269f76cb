"""A replayed tool loop: the candidate's prompt and the recorded tools, sent again and again
while the model asks for tools, each call answered by the tool policy.

The chat grows as the agent's did: the prompt's messages, then per round the assistant's
turn with its calls (OpenAI's shape) and one `tool` turn per result. The loop ends when
the model replies without a call (that reply is the loop's output), when the policy can
answer no call (the call itself is the output, and the judge judges it), or after
`max_rounds` (the last calls are the output).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.agents.tool_policy import Key, ToolPolicy
from infra.lm import LM, Message
from infra.types import Step


@dataclass
class LoopRun:
    """What a loop did: its output, each call and result as steps, tokens, and how each
    call was answered."""

    output: str = ""
    steps: list[Step] = field(default_factory=list)
    usage: Counter[str] = field(default_factory=Counter)
    answered: Counter[str] = field(default_factory=Counter)
    stopped: bool = False  # a call nothing answered ended the trajectory


async def run_tool_loop(
    lm: LM,
    name: str,
    component: str | None,
    prompt: list[Message],
    tools: list[dict[str, Any]],
    tool_components: Mapping[str, str],
    policy: ToolPolicy,
    recorded: dict[Key, str],
    max_rounds: int,
    **params: Any,
) -> LoopRun:
    """Run the loop of step `name` (made from `component`) from the rendered `prompt`;
    `tool_components`: tool name -> the component its description is, credited with the
    tool's steps."""
    run = LoopRun()
    chat = list(prompt)
    for _ in range(max_rounds):
        completion = await lm.complete(chat, tools=tools or None, **params)
        run.usage.update(
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
        )
        calls = completion.tool_calls
        written = "\n".join([completion.text.strip(), *(c.written() for c in calls)]).strip()
        run.steps.append(Step(name, component, list(chat), written))
        run.output = written
        if not calls:
            return run
        entries = [call.openai(i) for i, call in enumerate(calls)]
        said = completion.text or None
        chat.append({"role": "assistant", "content": said, "tool_calls": entries})
        for call, entry in zip(calls, entries, strict=True):
            result, how = policy.resolve(call, recorded)
            run.answered[how] += 1
            if result is None:
                run.stopped = True
                return run
            run.steps.append(Step(call.name, tool_components.get(call.name), [], result))
            chat.append({"role": "tool", "tool_call_id": entry["id"], "content": result})
    return run
