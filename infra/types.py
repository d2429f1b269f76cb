"""The few data types every stage shares: one task instance and one judged run of it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

CONVERSATION = "conversation"  # Example metadata: the earlier turns of its conversation


@dataclass(frozen=True)
class Example:
    """One task instance: what the agent sees, and the reference when one is known.

    `id` is stable across nights (the Langfuse trace id for production examples), so
    caches, splits and reports can refer to it.
    """

    id: str
    inputs: dict[str, Any]
    reference: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def conversation(self) -> tuple[tuple[str, str], ...]:
        """A conversation's earlier turns, oldest first, as (request, reply): what was
        said before this one (`infra.traces.sessions`); empty outside a conversation."""
        return tuple(self.metadata.get(CONVERSATION, ()))

    def in_conversation(self, turns: tuple[tuple[str, str], ...]) -> Example:
        """This example after `turns`: the judge reads them before its request."""
        return replace(self, metadata={**self.metadata, CONVERSATION: turns}) if turns else self


@dataclass(frozen=True)
class Step:
    """One call of a multi-step run, as the reflection reads it."""

    name: str  # the observation's name in the trace
    # the prompt component it rendered (for a replayed tool call: the component describing
    # the tool, and no messages); None: a recorded tool or a fixed call
    component: str | None
    messages: list[dict[str, str]]  # what it was sent (empty for a tool)
    output: str


@dataclass
class Rollout:
    """A candidate's run on one example: what came out, and how it was judged."""

    example: Example
    prompts: dict[str, str]
    output: str
    messages: list[dict[str, str]]  # the exact chat sent to the model, for SFT and reflection
    score: float | None = None
    usage: dict[str, int] = field(default_factory=dict)
    # every call of a multi-step run in order, the last being `messages` -> `output`;
    # empty for an agent that makes one call
    steps: list[Step] = field(default_factory=list)
    # a replayed tool-calling run: how many of its tool calls were reused, looked up,
    # simulated or stopped at (`infra.agents.tool_policy`)
    tool_steps: dict[str, int] = field(default_factory=dict)
    # the tools offered to the call that wrote `output` (OpenAI's shape), as the model was
    # shown them: a training prompt made from `messages` shows them too
    tools: list[dict[str, Any]] = field(default_factory=list)
