"""OpenAILM: against flywheel's own server over real HTTP, and a scripted transport."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import openai
import pytest
import uvicorn
from pydantic import SecretStr

from infra.lm.local import LocalLM
from infra.lm.openai_lm import MISSING_LOGPROB, OpenAILM
from infra.lm.server import create_app
from infra.settings import LMSettings

ASK = [{"role": "user", "content": "What is the capital of France?"}]


def reply(text: str = "Paris", top: dict[str, float] | None = None) -> dict:
    logprobs = None
    if top is not None:
        tops = [{"token": t, "logprob": v, "bytes": None} for t, v in top.items()]
        logprobs = {
            "content": [{"token": text, "logprob": -0.1, "bytes": None, "top_logprobs": tops}]
        }
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": logprobs,
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }


def scripted(handler, **settings) -> OpenAILM:
    transport = httpx.MockTransport(handler)
    config = LMSettings(backend="openai", max_retries=3, **settings)
    return OpenAILM(config, http_client=httpx.AsyncClient(transport=transport))


async def test_retries_server_errors_with_backoff():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(time.monotonic())
        if len(seen) <= 2:
            return httpx.Response(503, json={"error": {"message": "busy"}})
        return httpx.Response(200, json=reply())

    done = await scripted(handler).complete(ASK)
    assert done.text == "Paris" and done.usage.completion_tokens == 1
    assert len(seen) == 3
    assert seen[2] - seen[1] > 0  # waited between attempts


async def test_retries_connection_errors():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) <= 2:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json=reply())

    assert (await scripted(handler).complete(ASK)).text == "Paris"


async def test_gives_up_after_max_retries():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": {"message": "down"}})

    lm = scripted(handler)
    lm.client = lm.client.with_options(max_retries=0)
    with pytest.raises(openai.InternalServerError):
        await lm.complete(ASK)


async def test_concurrency_limit_adapter_as_model_and_secret():
    state = {"now": 0, "peak": 0, "models": []}

    async def handler(request: httpx.Request) -> httpx.Response:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        state["models"].append(json.loads(request.content)["model"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return httpx.Response(200, json=reply())

    lm = scripted(handler, max_concurrency=2, api_key=SecretStr("sk-secret"))
    await lm.complete_batch([ASK] * 6, adapter="tuned")
    assert state["peak"] == 2 and set(state["models"]) == {"tuned"}
    assert "sk-secret" not in repr(lm)


async def test_choice_logprobs_reads_the_first_token():
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["max_tokens"] == 1 and body["top_logprobs"] == 20
        return httpx.Response(200, json=reply("Yes", {"Yes": -0.2, " No": -1.8, "N": -3.0}))

    scores = await scripted(handler).choice_logprobs(ASK, ["Yes", "No", "Maybe"])
    assert scores == [-0.2, -1.8, MISSING_LOGPROB]


@pytest.fixture(scope="module")
def served():
    """flywheel's own server on a free localhost port, in a background thread."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    lm = LocalLM(LMSettings(batch_wait_ms=2))
    server = uvicorn.Server(uvicorn.Config(create_app(lm, "base"), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield lm, f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join()
    lm.close()


@pytest.mark.slow
async def test_against_the_local_server(served):
    served_lm, base_url = served
    lm = OpenAILM(LMSettings(backend="openai", base_url=base_url, model="base"))
    done = await lm.complete(ASK, max_tokens=8, logprobs=True)
    # greedy: the server's text is the engine's own (not a fixed answer: which of two
    # near-tied first tokens wins is bf16 rounding)
    assert done.text == (await served_lm.complete(ASK, max_tokens=8)).text
    # one log-probability per token of the text; a stop token is counted, not shown
    assert done.text and 1 <= len(done.token_logprobs) <= done.usage.completion_tokens
    assert done.usage.prompt_tokens > 0
    # for single-token choices the first-token approximation is the exact score, up to
    # the served logits' bf16 rounding (0.125 apart between 16 and 32; the scorer's head
    # runs in float32)
    judge = [{"role": "user", "content": "Is Paris the capital of France? Answer Yes or No."}]
    yes, no = await lm.choice_logprobs(judge, ["Yes", "No"])
    exact = await served_lm.choice_logprobs(judge, ["Yes", "No"])
    assert [yes, no] == pytest.approx(exact, abs=0.15)
    with pytest.raises(openai.NotFoundError):
        await lm.complete(ASK, adapter="missing")
    await lm.aclose()
