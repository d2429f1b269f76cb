"""The one model interface everything above `infra` talks to.

Backends differ (in-process transformers, any OpenAI-compatible server); callers do
not. Every call is async so that many rollouts can be in flight at once and a backend
can batch them. `AdapterLM` adds what the slow loop needs: the base model's files and
LoRA adapters served by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from infra.lm.tools import ToolCall

# {"role": "system" | "user" | "assistant" | "tool", "content": ...}; in a tool-calling
# chat an assistant turn may carry `tool_calls` and a tool turn its `tool_call_id`
# (OpenAI's shapes, see `infra.lm.tools`)
Message = dict[str, Any]


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
    finish_reason: str = "stop"  # "stop" | "length" | "tool_calls"
    tool_calls: list[ToolCall] = field(default_factory=list)  # asked for, given `tools`


@runtime_checkable
class LM(Protocol):
    """An async chat model.

    `complete` params: max_tokens (int), temperature (float, 0 = greedy), stop
    (list[str]), logprobs (bool), adapter (str | None: a LoRA adapter name the backend
    knows, None for the base model), seed (int), tools (list of OpenAI-style tool
    definitions: the reply's calls come back in `Completion.tool_calls`); an
    OpenAI-compatible backend also takes model (str | None: another model its server
    serves, None for the configured one).
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

    async def features(self, messages: list[Message], adapter: str | None = None) -> list[float]:
        """The final hidden state (after the model's final norm) at the last token of the
        chat prompt, generation prompt included (the tokens `complete` would prefill).

        This is what a reward-model judge fits a logistic head on. A backend that cannot
        see the model's hidden states (an OpenAI-compatible server) raises
        NotImplementedError.
        """
        ...


@runtime_checkable
class AdapterLM(LM, Protocol):
    """An `LM` that serves LoRA adapters by name next to its base model.

    The slow loop trains an adapter from `base_model_path`, hands the saved folder to
    `load_adapter`, then asks for it with `adapter=name` in `complete` and
    `choice_logprobs`. Loading a name that is already loaded replaces it (a retrained
    adapter under the same name), in every backend.

    On Python 3.11, `isinstance(lm, AdapterLM)` reads `base_model_path`, which a remote
    backend resolves on first use.
    """

    base_model_path: str
    """A local copy of the served base model, which LoRA training starts from."""

    async def load_adapter(self, name: str, path: str | Path) -> None:
        """Serve the peft LoRA adapter saved in folder `path` under `name`.

        `path` is read by whatever serves the model: for a remote server, a path on its
        machine. Returns once requests for `name` can run; raises if it cannot be loaded.
        """
        ...

    async def unload_adapter(self, name: str) -> None:
        """Stop serving `name` and free what it held (a name not loaded is no error)."""
        ...

    async def adapters(self) -> list[str]:
        """The adapter names the backend serves now (not the base model's)."""
        ...
