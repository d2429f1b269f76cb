"""The remote backend: any OpenAI-compatible endpoint (vLLM, llama.cpp server, OpenAI)."""

from __future__ import annotations

import asyncio
import json
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx
import openai
import pydantic
from openai import AsyncOpenAI

from infra.lm.calls import (
    CallTally,
    CountingTransport,
    FaultKind,
    ModelCallFailed,
    fault_of_status,
)
from infra.lm.model_files import resolve_model_path
from infra.lm.protocol import Completion, Message, Usage
from infra.lm.tools import Tool, call_from, check_tools
from infra.settings import LMSettings

# What a choice scores when its first token is not among the top 20 the server returns
# while another choice's is: below any listed token, so it ranks last, but finite so
# ratios stay defined. When no choice is listed the call fails (`ModelCallFailed`).
MISSING_LOGPROB = -100.0


class UnreadableReply(Exception):
    """A 200 whose body is not a chat completion: cut short, or without choices."""


# What the SDK raises for a 200 whose body is not a chat completion.
UNREADABLE = (json.JSONDecodeError, pydantic.ValidationError, openai.APIResponseValidationError)


class OpenAILM:
    """`AdapterLM` over the `openai` SDK.

    Retries (connection errors, timeouts, 408/409/429/5xx, `Retry-After`) with
    exponential backoff and jitter are the SDK's own, `settings.max_retries` times; a
    timed-out attempt's connection is closed, which is how vLLM learns to abort it. A
    call that still fails, or whose reply cannot be read, raises `ModelCallFailed`, and
    `tally` counts both. An adapter is a model name: vLLM serves each LoRA adapter
    under its own name (`--lora-modules name=path`, or loaded at run time with
    `load_adapter`).
    """

    def __init__(self, settings: LMSettings, transport: httpx.AsyncBaseTransport | None = None):
        self.model = settings.model
        self._settings = settings
        self.tally = CallTally(
            (settings.prompt_price_per_million, settings.completion_price_per_million)
        )
        key = settings.api_key.get_secret_value() if settings.api_key else "EMPTY"
        counted = CountingTransport(transport or httpx.AsyncHTTPTransport(), self.tally)
        self.client = AsyncOpenAI(
            base_url=settings.base_url,
            api_key=key,  # only the SDK holds it; nothing here prints or logs it
            timeout=settings.timeout_s,
            max_retries=settings.max_retries,
            http_client=httpx.AsyncClient(transport=counted, timeout=settings.timeout_s),
        )
        self._slots = asyncio.Semaphore(settings.max_concurrency)

    @cached_property
    def base_model_path(self) -> str:
        """A local copy of the served base model, which LoRA training starts from
        (`settings.model_path`, else the embedded model); resolved on first use."""
        return str(resolve_model_path(self._settings.model_path))

    async def load_adapter(self, name: str, path: str | Path) -> None:
        """Have the server load the LoRA adapter in folder `path` (a path the server can
        read) under `name`; a loaded name is replaced.

        vLLM's runtime loading (`--enable-lora`, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; a
        404 means it is off, or no adapter is at `path`); flywheel's own server has the
        same endpoint. `load_inplace` is vLLM's way to replace an adapter under a loaded
        name. The call goes through the SDK client: its key, retries and timeout apply.
        """
        await self.client.post(
            "/load_lora_adapter",
            body={"lora_name": name, "lora_path": str(path), "load_inplace": True},
            cast_to=str,  # the server answers plain text ("Success: ...")
        )

    async def unload_adapter(self, name: str) -> None:
        """vLLM's `POST /v1/unload_lora_adapter`; an adapter the server does not hold is
        no error (its 404 is the answer to a name already gone)."""
        try:
            await self.client.post("/unload_lora_adapter", body={"lora_name": name}, cast_to=str)
        except openai.NotFoundError:
            pass

    async def adapters(self) -> list[str]:
        """The server's LoRA adapters: vLLM lists each as a model whose `parent` is the
        base model; base models (and servers without adapters) list none."""
        return [
            card.id
            async for card in self.client.models.list()
            if card.id != self.model and getattr(card, "parent", None)
        ]

    def __repr__(self) -> str:
        return f"OpenAILM(base_url={str(self.client.base_url)!r}, model={self.model!r})"

    async def _create(self, **kwargs: Any):
        """One chat completion with at least one choice, or `ModelCallFailed`. A reply
        that is not one (a body cut short) is asked again like a 5xx, which the SDK
        does not do: up to `max_retries` times, after 0.5 s, 1 s, 2 s..."""
        self.tally.call()
        async with self._slots:
            for attempt in range(self._settings.max_retries + 1):
                try:
                    response = await self._create_once(**kwargs)
                except UnreadableReply as error:
                    if attempt == self._settings.max_retries:
                        raise self._failed("malformed", str(error)) from error
                    self.tally.attempt_failed("malformed")
                    await asyncio.sleep(0.5 * 2**attempt)
                else:
                    if usage := response.usage:
                        self.tally.tokens(usage.prompt_tokens, usage.completion_tokens)
                    return response
        raise AssertionError("unreachable")

    async def _create_once(self, **kwargs: Any):
        try:
            response = await self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as error:
            kind = fault_of_status(error.status_code)
            if kind is None:  # 401, 403, 404: the settings are wrong, not the call
                raise
            raise self._failed(kind, f"HTTP {error.status_code}") from error
        except openai.APITimeoutError as error:
            raise self._failed("timeout", "no reply in time") from error
        except openai.APIConnectionError as error:
            raise self._failed("connection", type(error.__cause__ or error).__name__) from error
        except UNREADABLE as error:
            raise UnreadableReply("the reply is not a chat completion") from error
        if not response.choices:
            raise UnreadableReply("the reply has no choices")
        return response

    def _failed(self, kind: FaultKind, detail: str) -> ModelCallFailed:
        """Count the call as failed for good (and, for a reply that cannot be read, its
        last attempt, which the transport saw succeed)."""
        if kind == "malformed":
            self.tally.attempt_failed(kind)
        self.tally.call_failed(kind)
        return ModelCallFailed(kind, f"{detail} from {self.client.base_url}")

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
        model: str | None = None,
        tools: list[Tool] | None = None,
    ) -> Completion:
        extra: dict[str, Any] = {}
        if tools:
            check_tools(tools)
            extra["tools"] = tools
        if stop:
            extra["stop"] = stop
        if seed is not None:
            extra["seed"] = seed
        if logprobs or top_logprobs:
            extra["logprobs"] = True
            if top_logprobs:
                extra["top_logprobs"] = top_logprobs
        response = await self._create(
            model=adapter or model or self.model,
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            **extra,
        )
        choice = response.choices[0]
        usage = response.usage
        content = choice.logprobs.content if choice.logprobs else None
        if extra.get("logprobs") and not content:
            raise self._failed("malformed", "the reply has no log-probabilities")
        calls = [call_from(c.model_dump()) for c in choice.message.tool_calls or []]
        return Completion(
            text=choice.message.content or "",
            usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
            token_logprobs=[t.logprob for t in content] if content else None,
            finish_reason=choice.finish_reason or "stop",
            tool_calls=[c for c in calls if c is not None],
        )

    async def complete_batch(self, batch: list[list[Message]], **params) -> list[Completion]:
        return list(await asyncio.gather(*(self.complete(m, **params) for m in batch)))

    async def choice_logprobs(
        self, messages: list[Message], choices: list[str], adapter: str | None = None
    ) -> list[float]:
        """An approximation: the log-probability of each choice's FIRST token only.

        Chat servers do not score given text, so we read the top 20 alternatives for the
        first reply token and give each choice the listed token that is the longest
        prefix of it (leading spaces ignored). Choices sharing a first token tie; a
        choice with no listed prefix gets MISSING_LOGPROB. A reply without log-
        probabilities, or with none of the choices listed, is no answer: it raises
        `ModelCallFailed` instead of scoring every choice alike. LocalLM scores exactly.
        """
        response = await self._create(
            model=adapter or self.model,
            messages=messages,
            max_tokens=1,
            temperature=0.0,
            logprobs=True,
            top_logprobs=20,
        )
        logprobs = response.choices[0].logprobs
        content = logprobs.content if logprobs else None
        if not content or not content[0].top_logprobs:
            raise self._failed("malformed", "the reply has no top log-probabilities")
        listed = [(t.token.strip(), t.logprob) for t in content[0].top_logprobs]
        scores = []
        for choice in choices:
            prefixes = [(len(t), lp) for t, lp in listed if t and choice.strip().startswith(t)]
            scores.append(max(prefixes)[1] if prefixes else None)
        if all(score is None for score in scores):
            first = content[0].token
            raise self._failed("malformed", f"the reply starts {first!r}, none of {choices}")
        return [MISSING_LOGPROB if score is None else score for score in scores]

    async def features(self, messages: list[Message], adapter: str | None = None) -> list[float]:
        raise NotImplementedError(
            f"{self.client.base_url} is an OpenAI-compatible server, which returns no hidden "
            "states: read features with the local backend (lm.backend = 'local')."
        )

    async def aclose(self) -> None:
        await self.client.close()
