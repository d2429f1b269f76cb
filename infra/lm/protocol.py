"""The one model interface everything above `infra` talks to.

Backends differ (in-process transformers, any OpenAI-compatible server); callers do
not. Both methods are async so that many rollouts can be in flight at once and a
backend can batch them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Completion:
    text: str
    usage: Usage = field(default_factory=Usage)
    # log-probability of each generated token, when asked for with logprobs=True
    token_logprobs: list[float] | None = None
    finish_reason: str = "stop"  # "stop" | "length"


@runtime_checkable
class LM(Protocol):
    """An async chat model.

    `complete` params: max_tokens (int), temperature (float, 0 = greedy), stop
    (list[str]), logprobs (bool), adapter (str | None: a LoRA adapter name the backend
    knows, None for the base model), seed (int).
    """

    async def complete(self, messages: list[Message], **params) -> Completion: ...

    async def complete_batch(self, batch: list[list[Message]], **params) -> list[Completion]: ...

    async def choice_logprobs(
        self, messages: list[Message], choices: list[str], adapter: str | None = None
    ) -> list[float]:
        """Log-probability of each candidate answer as the assistant's reply.

        This is what a judge on a small model reads instead of its text verdict.
        """
        ...
