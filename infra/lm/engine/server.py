"""An OpenAI-compatible chat server over LocalLM, for tools that speak only that API.

`POST /v1/chat/completions` (n=1, no streaming) and `GET /v1/models`. A request's `model`
picks the base model or a loaded adapter by name, as vLLM does with LoRA modules, and
`POST /v1/load_lora_adapter` loads one at run time, as vLLM's endpoint of that name does:
same body, same plain-text answer, and a loaded name is replaced only with `load_inplace`.
`/v1/models` lists each adapter as vLLM does, with the base model as its `parent`, which
is how `OpenAILM.adapters` tells them apart. A request's `tools` reach the model through
its chat template (`infra.lm.tools`) and its calls come back as `tool_calls`.
"""

from __future__ import annotations

import sys
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field

from infra.lm.calls import ModelCallFailed
from infra.lm.engine.local import LocalCompletion, LocalLM
from infra.settings import LMSettings


class ChatMessage(BaseModel):
    role: str
    content: str | None = None  # None on an assistant turn that only called tools
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class UnloadAdapterRequest(BaseModel):
    lora_name: str


class LoadAdapterRequest(BaseModel):
    lora_name: str = Field(min_length=1)
    lora_path: str = Field(min_length=1)
    load_inplace: bool = False  # vLLM's: replace an adapter already loaded under the name


class ChatRequest(BaseModel):
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)  # the OpenAI default
    stop: str | list[str] | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    n: int = 1
    seed: int | None = None
    stream: bool = False
    tools: list[dict[str, Any]] | None = None


def create_app(lm: LocalLM, model_name: str, adapters: dict[str, Path] | None = None) -> FastAPI:
    """The app serves `lm` as `model_name` and each adapter under its own name."""

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        for name, path in (adapters or {}).items():
            await lm.load_adapter(name, path)
        yield

    app = FastAPI(title="flywheel local model", lifespan=lifespan)

    @app.get("/v1/models")
    async def models() -> dict:
        cards = [_model_card(model_name, root=lm.base_model_path)]
        cards += [_model_card(name, parent=model_name) for name in await lm.adapters()]
        return {"object": "list", "data": cards}

    @app.post("/v1/load_lora_adapter", response_class=PlainTextResponse)
    async def load_adapter(request: LoadAdapterRequest) -> str:
        """vLLM's runtime adapter loading, so OpenAILM.load_adapter works here too."""
        name = request.lora_name
        if name == model_name:
            raise HTTPException(400, f"{name!r} is the base model's name")
        if name in await lm.adapters() and not request.load_inplace:
            raise HTTPException(400, f"The lora adapter '{name}' has already been loaded.")
        try:
            await lm.load_adapter(name, request.lora_path)
        except (OSError, ValueError) as error:
            raise HTTPException(400, f"cannot load {request.lora_path}: {error}") from error
        return f"Success: LoRA adapter '{name}' added successfully."

    @app.post("/v1/unload_lora_adapter", response_class=PlainTextResponse)
    async def unload_adapter(request: UnloadAdapterRequest) -> str:
        """vLLM's runtime adapter unloading."""
        if request.lora_name not in await lm.adapters():
            raise HTTPException(404, f"The lora adapter '{request.lora_name}' cannot be found.")
        await lm.unload_adapter(request.lora_name)
        return f"Success: LoRA adapter '{request.lora_name}' removed successfully."

    @app.post("/v1/chat/completions")
    async def chat(request: ChatRequest) -> dict:
        if request.n != 1 or request.stream:
            raise HTTPException(400, "only n=1 without streaming is supported")
        if request.model != model_name and request.model not in await lm.adapters():
            raise HTTPException(404, f"model {request.model!r} does not exist")
        stop = [request.stop] if isinstance(request.stop, str) else request.stop
        try:
            done = await lm.complete(
                [m.model_dump(exclude_none=True) for m in request.messages],
                max_tokens=request.max_completion_tokens or request.max_tokens or 256,
                temperature=request.temperature,
                stop=stop,
                logprobs=request.logprobs,
                top_logprobs=(request.top_logprobs or 0) if request.logprobs else 0,
                adapter=None if request.model == model_name else request.model,
                seed=request.seed,
                tools=request.tools,
            )
        except (ValueError, ModelCallFailed) as error:  # e.g. a prompt longer than the context
            raise HTTPException(400, str(error)) from error
        usage = done.usage
        message: dict[str, Any] = {"role": "assistant", "content": done.text}
        if done.tool_calls:
            message["tool_calls"] = [call.openai(i) for i, call in enumerate(done.tool_calls)]
            message["content"] = done.text or None
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": _logprobs(done) if request.logprobs else None,
                    "finish_reason": done.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            },
        }

    return app


def _model_card(name: str, root: str | None = None, parent: str | None = None) -> dict:
    """vLLM's card: an adapter's `parent` is the base model's name, a base model has none."""
    card = {"id": name, "object": "model", "created": 0, "owned_by": "flywheel"}
    return card | {"root": root, "parent": parent}


def _token(text: str, logprob: float) -> dict:
    return {"token": text, "logprob": logprob, "bytes": list(text.encode())}


def _logprobs(done: LocalCompletion) -> dict:
    tops = done.top_logprobs or [{} for _ in done.tokens]
    return {
        "content": [
            {**_token(text, lp), "top_logprobs": [_token(t, v) for t, v in top.items()]}
            for text, lp, top in zip(done.tokens, done.token_logprobs or [], tops, strict=True)
        ]
    }


def serve(
    settings: LMSettings, host: str = "127.0.0.1", port: int = 8000, adapter_path: str | None = None
) -> None:
    """Serve the local model (and the adapter at `adapter_path`, named after its folder)."""
    lm = LocalLM(settings)
    print(lm.describe(), file=sys.stderr, flush=True)  # which kernels this CPU got
    adapters = {Path(adapter_path).name: Path(adapter_path)} if adapter_path else None
    try:
        uvicorn.run(create_app(lm, settings.model, adapters), host=host, port=port)
    finally:
        lm.close()
