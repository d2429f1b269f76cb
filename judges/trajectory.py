"""What a judge reads of a run: the conversation before it, its request, every step of it.

A multi-step agent's reply is right or wrong by what came before it: the tool it called,
the arguments, the result it read, an earlier step's answer. So the judge reads the whole
trajectory, and it reads it the same way wherever it judges: a recorded trace (the labels
it is aligned on, `flows.night.collect`) and a candidate's replay of it (the rollouts it
scores) are rendered by the one function here from the same kind of steps, so what the
labels taught it is what it is asked. Only what happened is written (each step's name and
what it said or returned), never whether it was re-run: the judge cannot tell a recorded
run from a replayed one but by what they did.

A turn of a conversation (a Langfuse session) is read after the turns before it, which
its example carries (`infra.traces.sessions`).

The steps are numbered, so the judge can also say which went wrong first: a structured
verdict the optimizer credits to the step's component (`AgentJudgeAdapter.blame`).
"""

from __future__ import annotations

from infra.agents.replay import recorded_steps
from infra.types import Example, Step
from judges.types import render_inputs

FAILED_STEP_QUESTION = (
    "The reply failed. Which step went wrong first? Answer with the step's number only{tools}."
)


def reply_step(steps: list[Step]) -> int:
    """The index of the step that wrote the reply: the last model call."""
    return max((i for i, s in enumerate(steps) if s.messages), default=len(steps) - 1)


def trajectory_text(steps: list[Step]) -> str:
    """The steps, numbered from 1, each with what it said (a model call) or returned (a
    tool); the one that wrote the reply points at it. Empty for a run of one call."""
    if len(steps) < 2:
        return ""
    last = reply_step(steps)
    lines = []
    for number, step in enumerate(steps, start=1):
        if number - 1 == last:
            lines.append(f"{number}. {step.name} gave the reply below.")
        elif step.messages:
            lines.append(f"{number}. {step.name} said: {step.output.strip()}")
        else:
            lines.append(f"{number}. {step.name} (a tool) returned: {step.output.strip()}")
    return "\n".join(lines)


def conversation_text(turns: tuple[tuple[str, str], ...]) -> str:
    """A conversation's earlier turns, oldest first, as the judge reads them."""
    lines = []
    for request, reply in turns:
        lines += [f"user: {request.strip()}", f"assistant: {reply.strip()}"]
    return "\n".join(lines)


def judged_request(example: Example, steps: list[Step]) -> str:
    """The request as the judge reads it: the conversation before it (in a session),
    the example's inputs, then its trajectory."""
    request = render_inputs(example.inputs)
    if example.conversation:
        earlier = conversation_text(example.conversation)
        request = f"Earlier in this conversation:\n{earlier}\n\nThis turn:\n{request}"
    trajectory = trajectory_text(steps)
    return f"{request}\n\nSteps:\n{trajectory}" if trajectory else request


def recorded_request(example: Example) -> str:
    """The request of a trace as logged, as the judge reads it: with its recorded steps."""
    return judged_request(example, recorded_steps(example))


def failed_step_choices(steps: list[Step], uncalled_tools: list[str]) -> list[str]:
    """What the judge may answer when asked which step failed: each step's number, and
    the name of each tool it was offered and never called (a missing call has no step)."""
    return [str(n) for n in range(1, len(steps) + 1)] + uncalled_tools


def failed_step_question(uncalled_tools: list[str]) -> str:
    tools = ", or the name of a tool that should have been called: " + ", ".join(uncalled_tools)
    return FAILED_STEP_QUESTION.format(tools=tools if uncalled_tools else "")
