"""The in-process backend: a transformers chat model (plus LoRA adapters) on the batcher."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from infra.lm.calls import CallTally, ModelCallFailed
from infra.lm.engine import decode_attention
from infra.lm.engine.adapters import lora_deltas
from infra.lm.engine.architectures import check_supported
from infra.lm.engine.batcher import Batcher, Generation, Request
from infra.lm.engine.checkpoint_weights import CheckpointWeights
from infra.lm.engine.choice_scorer import ChoiceScorer
from infra.lm.engine.cpu import cpu_has_fast_bf16
from infra.lm.engine.features import FeatureReader
from infra.lm.engine.readings import Readings
from infra.lm.model_files import resolve_model_path
from infra.lm.protocol import Completion, Message, Usage
from infra.lm.tools import (
    Tool,
    check_tools,
    for_template,
    parse_tool_calls,
    template_reads_tools,
    with_tools_described,
)
from infra.settings import LMSettings


@dataclass
class LocalCompletion(Completion):
    """A Completion plus per-token detail the OpenAI-compatible server reports."""

    tokens: list[str] = field(default_factory=list)  # text of each token in token_logprobs
    top_logprobs: list[dict[str, float]] | None = None  # alternatives per token


def pick_dtype(setting: str) -> torch.dtype:
    if setting == "auto":
        return torch.bfloat16 if cpu_has_fast_bf16() else torch.float32
    return getattr(torch, setting)


class LocalLM:
    """`AdapterLM` over a local checkpoint; requests from all callers share one continuous
    batch, and each LoRA adapter is served as merged weights of its own.

    Once started, the engine holds the only copy of the model's Linear weights (packed);
    the transformers model keeps its embeddings, norms and config (`fused_decode`).
    """

    def __init__(self, settings: LMSettings | None = None):
        settings = settings or LMSettings()
        # More threads than usable cores (containers, taskset) makes every matmul wait.
        torch.set_num_threads(min(torch.get_num_threads(), len(os.sched_getaffinity(0))))
        path = resolve_model_path(settings.model_path)
        self.base_model_path = str(path)  # the base checkpoint, which LoRA training starts from
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        # a template that renders `tools` gets them as they are; others in the system turn
        self.native_tools = template_reads_tools(self.tokenizer.chat_template)
        check_supported(AutoConfig.from_pretrained(path), str(path))  # before reading weights
        self.dtype = pick_dtype(settings.dtype)
        engine_model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype).eval()
        eos = engine_model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos]
        self.stop_token_ids = frozenset(
            t for t in [*eos, self.tokenizer.eos_token_id] if t is not None
        )
        self.batcher = Batcher(
            engine_model,
            decode=self.tokenizer.decode,
            max_batch_size=settings.max_batch_size,
            batch_wait_ms=settings.batch_wait_ms,
            batch_invariant=settings.batch_invariant,
            adapt_threads=settings.adapt_threads,
            checkpoint=CheckpointWeights.of(path, self.dtype),
        )
        self.scorer = ChoiceScorer(self.batcher)
        self.feature_reader = FeatureReader(self.batcher)
        self.readings = Readings()  # prompts already read, asked again at no prefill
        # calls and tokens per stage; only a prompt too long fails here
        self.tally = CallTally(
            (settings.prompt_price_per_million, settings.completion_price_per_million)
        )

    @cached_property
    def model(self) -> PreTrainedModel:
        """transformers' own model of the checkpoint, loaded on first use: a second copy of
        the weights, which the engine does not keep. Tests and benchmarks compare the engine
        with its forward and `generate`, which get the grouped decode-step kernel."""
        return AutoModelForCausalLM.from_pretrained(
            self.base_model_path, dtype=self.dtype, attn_implementation=decode_attention.NAME
        ).eval()

    def describe(self) -> str:
        """The engine this process runs: dtype, threads, and what was checked on this CPU."""
        return (
            f"local engine: {self.dtype} on {torch.get_num_threads()} threads, "
            f"{self.batcher.plan.describe()}"
        )

    async def adapters(self) -> list[str]:
        return self.batcher.adapters

    async def load_adapter(self, name: str, path: str | Path) -> None:
        """Load a peft LoRA adapter saved at `path`; requests then ask for it by `name`.

        It is served as its own weights, the base plus peft's delta for each adapted
        module, so it runs the engine's fused products. peft's work runs on the engine's
        thread between decode steps (requests in flight pause for those seconds), never on
        the event loop. A loaded name is replaced.
        """
        await self.batcher.add_adapter(name, lambda: lora_deltas(self.batcher.model, path))
        self.readings.forget(name)  # made by the weights this name held before

    async def unload_adapter(self, name: str) -> None:
        await self.batcher.remove_adapter(name)
        self.readings.forget(name)

    async def rest(self) -> bool:
        """Free the engine's packed weights until the next call packs them again
        (`Batcher.rest`: seconds, against the 4 GiB a 1.5B model holds while idle).
        Whether it rested: not while a request is in flight."""
        return await self.batcher.rest()

    def _check_adapter(self, adapter: str | None) -> None:
        if not self.batcher.has_adapter(adapter):
            raise KeyError(f"unknown adapter {adapter!r}; loaded: {self.batcher.adapters}")

    def prompt_ids(self, messages: list[Message], tools: list[Tool] | None = None) -> list[int]:
        """The chat's tokens as the model's template renders it, tools included (their
        tokens count as the prompt's)."""
        chat = for_template(messages, self.native_tools)
        if tools and not self.native_tools:
            chat = with_tools_described(chat, tools)
        return self.tokenizer.apply_chat_template(
            chat,
            tools=tools if tools and self.native_tools else None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )

    def _fitting(self, messages: list[Message], after: int, tools: list[Tool] | None = None):
        """The prompt's tokens, counted as a call; a prompt that leaves no room for `after`
        more tokens in the context is refused alone, as a server answers 400, before it
        can take its batch down with it."""
        if tools:
            check_tools(tools)
        self.tally.call()
        ids = self.prompt_ids(messages, tools)
        limit = self.batcher.max_positions
        if len(ids) + after > limit:
            self.tally.attempt_failed("refused")
            self.tally.call_failed("refused")
            too_long = f"a prompt of {len(ids)} tokens exceeds the model's {limit}-token context"
            raise ModelCallFailed("refused", too_long)
        return ids

    async def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        logprobs: bool = False,
        top_logprobs: int = 0,
        adapter: str | None = None,
        seed: int | None = None,
        tools: list[Tool] | None = None,
    ) -> LocalCompletion:
        self._check_adapter(adapter)
        request = Request(
            prompt_ids=self._fitting(messages, after=1, tools=tools),
            max_new_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            stop_token_ids=self.stop_token_ids,
            stop_strings=tuple(stop or ()),
            adapter=adapter,
            want_logprobs=logprobs or top_logprobs > 0,
            top_logprobs=top_logprobs,
        )
        done = self._completion(await self.batcher.generate(request), request)
        self.tally.tokens(done.usage.prompt_tokens, done.usage.completion_tokens)
        if tools:
            done.text, done.tool_calls = parse_tool_calls(done.text)
            if done.tool_calls:
                done.finish_reason = "tool_calls"
        return done

    def _completion(self, gen: Generation, request: Request) -> LocalCompletion:
        ids = gen.token_ids
        if ids and ids[-1] in request.stop_token_ids:  # the end token is not part of the text
            ids = ids[:-1]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        for stop in request.stop_strings:  # stopped on a string: the text ends before it
            text = text.split(stop, 1)[0]
        done = LocalCompletion(
            text=text,
            usage=Usage(gen.prompt_tokens, len(gen.token_ids)),
            finish_reason=gen.finish_reason,
        )
        if gen.logprobs is not None:
            done.token_logprobs = gen.logprobs[: len(ids)]
            done.tokens = [self.tokenizer.decode([t]) for t in ids]
        if gen.top_logprobs is not None:
            done.top_logprobs = [
                {self.tokenizer.decode([t]): lp for t, lp in alternatives}
                for alternatives in gen.top_logprobs[: len(ids)]
            ]
        return done

    async def complete_batch(self, batch: list[list[Message]], **params) -> list[Completion]:
        return list(await asyncio.gather(*(self.complete(m, **params) for m in batch)))

    async def choice_logprobs(
        self, messages: list[Message], choices: list[str], adapter: str | None = None
    ) -> list[float]:
        """Sum of log-probabilities of each choice's tokens right after the prompt.

        The choice's tokens only: no end-of-turn token, so "Yes" also scores the start of
        "Yes, because...". Concurrent calls are scored together in one forward pass.
        """
        self._check_adapter(adapter)
        answers = [self.tokenizer(c, add_special_tokens=False).input_ids for c in choices]
        prompt = self._fitting(messages, after=max(map(len, answers)))
        key = ("choices", tuple(prompt), tuple(map(tuple, answers)), adapter)
        if (kept := self.readings.get(key)) is not None:
            return kept
        self.tally.tokens(len(prompt) + sum(map(len, answers)), 0)  # read, none written
        return self.readings.put(key, await self.scorer.score(prompt, answers, adapter))

    async def features(self, messages: list[Message], adapter: str | None = None) -> list[float]:
        """The final hidden state (after the model's final norm) at the last token of the
        prompt `complete` would prefill, as floats: what a reward-model judge fits its head
        on. Concurrent calls share one prefill, as choice scoring's do."""
        self._check_adapter(adapter)
        prompt = self._fitting(messages, after=0)
        key = ("features", tuple(prompt), adapter)
        if (kept := self.readings.get(key)) is not None:
            return kept
        self.tally.tokens(len(prompt), 0)  # read, none written
        return self.readings.put(key, await self.feature_reader.read(prompt, adapter))

    def close(self) -> None:
        self.batcher.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
