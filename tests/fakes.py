"""A scripted LM for unit tests of the machinery (the product path uses the real model),
and a random LoRA adapter for tests that serve one."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from pathlib import Path

from infra.lm import Completion, Usage
from infra.lm.tools import parse_tool_calls

Messages = list[dict[str, str]]


def hashed_features(messages: Messages, size: int = 16) -> list[float]:
    """A vector that stands for a prompt's hidden state: seeded by its text, so the same
    prompt always gives the same features and different prompts unrelated ones."""
    seed = hashlib.sha256(repr(messages).encode()).hexdigest()
    rng = random.Random(seed)
    return [rng.gauss(0, 1) for _ in range(size)]


class ScriptedLM:
    """`reply(messages) -> text` for completions; `p_first(messages) -> P(first choice)`;
    `feature(messages) -> features` for `features` (the final hidden state a reward head
    reads; by default hashed from the prompt's text)."""

    def __init__(
        self,
        reply: Callable[[Messages], str] = lambda m: "",
        p_first: Callable[[Messages], float] = lambda m: 0.5,
        feature: Callable[[Messages], list[float]] = hashed_features,
    ):
        self.reply = reply
        self.p_first = p_first
        self.feature = feature
        self.calls: list[Messages] = []
        self.tools: list[list[dict] | None] = []  # the tools each completion was offered
        self.choice_calls: list[Messages] = []  # verdicts read from token probabilities
        self.feature_calls: list[Messages] = []  # features read for a reward head

    async def complete(self, messages: Messages, **params) -> Completion:
        """Given `tools`, the reply's `<tool_call>` blocks are its calls, as the local
        engine reads them."""
        self.calls.append(messages)
        self.tools.append(params.get("tools"))
        text = self.reply(messages)
        done = Completion(text=text, usage=Usage(len(str(messages)), len(text.split())))
        if params.get("tools"):
            done.text, done.tool_calls = parse_tool_calls(text)
            done.finish_reason = "tool_calls" if done.tool_calls else "stop"
        return done

    async def complete_batch(self, batch: list[Messages], **params) -> list[Completion]:
        return [await self.complete(m, **params) for m in batch]

    async def choice_logprobs(
        self, messages: Messages, choices: list[str], adapter=None
    ) -> list[float]:
        self.choice_calls.append(messages)
        p = min(max(self.p_first(messages), 1e-6), 1 - 1e-6)
        return [math.log(p), math.log(1 - p)] + [math.log(1e-6)] * (len(choices) - 2)

    async def features(self, messages: Messages, adapter=None) -> list[float]:
        self.feature_calls.append(messages)
        return self.feature(messages)


def random_lora_adapter(base_model_path: str, folder: Path, seed: int = 0) -> Path:
    """A random (non-identity) LoRA adapter on q/v, saved the way weights/ saves one."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=torch.float32)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(folder)
    return folder


class CountingTally:
    """A progress display as a judging step sees it (`judges.calls.Tally`): what it was
    told to expect, and what it was told is done, each call's `n` in order."""

    def __init__(self):
        self.expected: list[int] = []
        self.done: list[int] = []

    def expect(self, n: int) -> None:
        self.expected.append(n)

    def advance(self, n: int = 1) -> None:
        self.done.append(n)
