"""OpenAILM: against flywheel's own server over real HTTP, and a scripted transport."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
import uvicorn
from pydantic import SecretStr

from infra.lm.calls import ModelCallFailed, current_stage
from infra.lm.engine.local import LocalLM
from infra.lm.engine.server import create_app
from infra.lm.openai_lm import MISSING_LOGPROB, OpenAILM
from infra.lm.protocol import AdapterLM
from infra.settings import LMSettings
from tests.fake_openai import chat_completion
from tests.fakes import random_lora_adapter
from tests.tool_chats import FIND, SHOWN_THEN_ASKED

ASK = [{"role": "user", "content": "What is the capital of France?"}]
JSON = {"content-type": "application/json"}


def reply(text: str = "Paris", top: dict[str, float] | None = None) -> dict:
    return chat_completion(text, top)


def scripted(handler, **settings) -> OpenAILM:
    transport = httpx.MockTransport(handler)
    config = LMSettings(backend="openai", **({"max_retries": 3} | settings))
    return OpenAILM(config, transport=transport)


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


async def test_gives_up_after_max_retries_with_a_failed_call_counted_per_stage():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": {"message": "down"}})

    lm = scripted(handler, max_retries=1)
    token = current_stage.set("judge")
    try:
        with pytest.raises(ModelCallFailed, match="server_error"):
            await lm.complete(ASK)
    finally:
        current_stage.reset(token)
    faults = lm.tally.stage("judge")
    assert faults.calls == 1 and faults.failed == 1
    assert faults.attempts_failed == {"server_error": 2}  # the first try and one retry
    assert lm.tally.stage("other").calls == 0


async def test_a_wrong_key_or_model_is_not_a_failed_call_but_stops():
    lm = scripted(lambda r: httpx.Response(401, json={"error": {"message": "bad key"}}))
    with pytest.raises(openai.AuthenticationError):
        await lm.complete(ASK)


@pytest.mark.parametrize(
    "body, kind",
    [
        (b'{"id": "x", "object": "chat.completion", "choices": [{"ind', "malformed"),
        (json.dumps({**reply(), "choices": []}).encode(), "malformed"),
    ],
)
async def test_an_unreadable_reply_is_asked_again_then_a_failed_call(body, kind):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    lm = scripted(handler, max_retries=1)
    with pytest.raises(ModelCallFailed, match=kind):
        await lm.complete(ASK)
    faults = lm.tally.stage("other")
    assert faults.calls_failed == {kind: 1} and faults.attempts_failed == {kind: 2}


async def test_a_reply_cut_short_once_is_asked_again():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            return httpx.Response(200, content=b'{"id": "x", "cho', headers=JSON)
        return httpx.Response(200, json=reply())

    lm = scripted(handler)
    assert (await lm.complete(ASK)).text == "Paris"
    assert lm.tally.stage("other").attempts_failed == {"malformed": 1}
    assert lm.tally.stage("other").failed == 0


async def test_a_request_the_server_turns_down_is_a_failed_call_not_retried():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(400, json={"error": {"message": "context length exceeded"}})

    with pytest.raises(ModelCallFailed, match="refused"):
        await scripted(handler).complete(ASK)
    assert len(calls) == 1


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


@pytest.mark.parametrize(
    "answer, why",
    [
        (reply("Yes"), "no top log-probabilities"),  # a 200 without logprobs
        (reply("Maybe", {"Maybe": -0.1, "Perhaps": -2.0}), "none of"),
    ],
)
async def test_choice_logprobs_without_any_choice_is_a_failed_call_not_a_tie(answer, why):
    lm = scripted(lambda request: httpx.Response(200, json=answer))
    with pytest.raises(ModelCallFailed, match=why):
        await lm.choice_logprobs(ASK, ["Yes", "No"])
    assert lm.tally.stage("other").calls_failed == {"malformed": 1}


async def test_complete_asked_for_logprobs_without_them_is_a_failed_call():
    lm = scripted(lambda request: httpx.Response(200, json=reply("Paris")))
    with pytest.raises(ModelCallFailed, match="log-probabilities"):
        await lm.complete(ASK, logprobs=True)


async def test_features_are_refused_with_a_sentence():
    served = scripted(lambda r: httpx.Response(200, json=reply()))
    with pytest.raises(NotImplementedError, match="returns no hidden states"):
        await served.features(ASK)


def test_is_an_adapter_lm():
    assert isinstance(scripted(lambda r: httpx.Response(500)), AdapterLM)


async def test_load_adapter_posts_through_the_sdk_client():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="Success: LoRA adapter 'night-1' added successfully.")

    lm = scripted(handler, base_url="http://vllm:8000/v1", api_key=SecretStr("sk-secret"))
    await lm.load_adapter("night-1", Path("/srv/adapters/night-1"))
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == "http://vllm:8000/v1/load_lora_adapter"
    assert json.loads(request.content) == {
        "lora_name": "night-1",
        "lora_path": "/srv/adapters/night-1",
        "load_inplace": True,  # a loaded name is replaced, as LocalLM does
    }
    assert request.headers["authorization"] == "Bearer sk-secret"


async def test_unload_adapter_posts_and_a_name_already_gone_is_no_error():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        if seen[-1]["lora_name"] == "gone":  # vLLM's answer for a name it does not hold
            return httpx.Response(404, json={"message": "cannot be found", "code": 404})
        if seen[-1]["lora_name"] == "bad":
            return httpx.Response(400, json={"message": "bad request", "code": 400})
        return httpx.Response(200, text="Success: LoRA adapter 'night-1' removed successfully.")

    lm = scripted(handler, base_url="http://vllm:8000/v1")
    await lm.unload_adapter("night-1")
    await lm.unload_adapter("gone")
    with pytest.raises(openai.BadRequestError):
        await lm.unload_adapter("bad")
    assert [body["lora_name"] for body in seen] == ["night-1", "gone", "bad"]


async def test_load_adapter_retries_server_errors_and_raises_on_client_errors():
    answers = iter([httpx.Response(503, text="busy"), httpx.Response(200, text="Success")])
    retried = scripted(lambda request: next(answers))
    await retried.load_adapter("a", "/srv/a")  # the SDK's retries apply

    calls = []

    def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if json.loads(request.content)["lora_path"] == "/srv/missing":  # vLLM's answers
            return httpx.Response(404, json={"message": "No adapter found", "code": 404})
        return httpx.Response(400, json={"message": "bad adapter", "code": 400})

    lm = scripted(refuse)
    with pytest.raises(openai.BadRequestError):
        await lm.load_adapter("a", "/srv/not-an-adapter")
    assert len(calls) == 1  # a 4xx is not retried
    with pytest.raises(openai.NotFoundError):
        await lm.load_adapter("a", "/srv/missing")


async def test_load_adapter_does_not_block_the_event_loop():
    ticked = asyncio.Event()

    async def tick() -> None:
        for _ in range(10):
            await asyncio.sleep(0.01)
        ticked.set()

    async def slow(request: httpx.Request) -> httpx.Response:
        # the server answers once the loop has ticked ten times meanwhile: a count, not a
        # time, so a slow machine waits longer instead of counting fewer ticks; a blocked
        # loop never ticks, and the wait runs out
        await asyncio.wait_for(ticked.wait(), timeout=60)
        return httpx.Response(200, text="Success")

    ticker = asyncio.create_task(tick())
    await scripted(slow).load_adapter("a", "/srv/a")
    assert ticker.done()  # the loop kept running while the server worked


async def test_adapters_are_the_models_with_a_parent():
    seen = []

    def card(name: str, parent: str | None = None) -> dict:
        body = {"id": name, "object": "model", "created": 0, "owned_by": "vllm"}
        return body | ({"parent": parent, "root": f"/srv/{name}"} if parent else {})

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        models = [card("base", parent=None), card("night-1", "base"), card("night-2", "base")]
        return httpx.Response(200, json={"object": "list", "data": models})

    lm = scripted(handler, model="base", api_key=SecretStr("sk-secret"))
    assert await lm.adapters() == ["night-1", "night-2"]
    assert seen[0].method == "GET" and seen[0].url.path == "/v1/models"
    assert seen[0].headers["authorization"] == "Bearer sk-secret"

    def plain(request: httpx.Request) -> httpx.Response:  # OpenAI, llama.cpp: no parents
        return httpx.Response(200, json={"object": "list", "data": [card("gpt-x")]})

    assert await scripted(plain, model="base").adapters() == []


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


@pytest.mark.slow
async def test_adapters_through_the_local_server(served, tmp_path):
    served_lm, base_url = served
    lm = OpenAILM(LMSettings(backend="openai", base_url=base_url, model="base"))
    assert isinstance(lm, AdapterLM)
    assert await lm.adapters() == []
    path = random_lora_adapter(served_lm.base_model_path, tmp_path / "night-1")
    await lm.load_adapter("night-1", path)
    assert await lm.adapters() == ["night-1"] == await served_lm.adapters()
    await lm.load_adapter("night-1", path)  # a loaded name is replaced, not refused
    assert await lm.adapters() == ["night-1"]
    done = await lm.complete(ASK, max_tokens=6, adapter="night-1")
    assert done.text == (await served_lm.complete(ASK, max_tokens=6, adapter="night-1")).text
    with pytest.raises(openai.BadRequestError):
        await lm.load_adapter("broken", tmp_path / "no-adapter-here")
    assert await lm.adapters() == ["night-1"]
    await lm.aclose()


async def test_tokens_and_their_cost_are_counted_per_stage():
    lm = scripted(
        lambda request: httpx.Response(200, json=reply()),
        prompt_price_per_million=1.0,
        completion_price_per_million=2.0,
    )
    token = current_stage.set("prompts")
    try:
        await lm.complete(ASK)
        await lm.complete(ASK)
    finally:
        current_stage.reset(token)
    stage = lm.tally.stage("prompts")
    assert (stage.calls, stage.prompt_tokens, stage.completion_tokens) == (2, 10, 2)
    assert stage.cost_usd == pytest.approx((10 * 1.0 + 2 * 2.0) / 1e6)


async def test_tools_go_to_the_server_and_its_calls_come_back():
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        body = reply("")
        body["choices"][0]["message"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "find_slot", "arguments": '{"day": "Monday"}'},
                }
            ],
        }
        body["choices"][0]["finish_reason"] = "tool_calls"
        return httpx.Response(200, json=body)

    done = await scripted(handler).complete(ASK, tools=[FIND])
    assert seen[0]["tools"] == [FIND]
    assert [(c.name, c.arguments, c.id) for c in done.tool_calls] == [
        ("find_slot", {"day": "Monday"}, "call_9")
    ]
    assert done.finish_reason == "tool_calls" and done.text == ""
    plain = await scripted(handler).complete(ASK)  # no tools asked: none sent
    assert plain.tool_calls and "tools" not in seen[1]


@pytest.mark.slow
async def test_tools_through_the_local_server(served):
    served_lm, base_url = served
    lm = OpenAILM(LMSettings(backend="openai", base_url=base_url, model="base"))
    chat = SHOWN_THEN_ASKED
    done = await lm.complete(chat, tools=[FIND], max_tokens=40)
    engine = await served_lm.complete(chat, tools=[FIND], max_tokens=40)
    assert done.tool_calls and [c.key() for c in done.tool_calls] == [
        c.key() for c in engine.tool_calls
    ]
    assert done.finish_reason == "tool_calls"
    assert done.usage.prompt_tokens == len(served_lm.prompt_ids(chat, [FIND]))
    await lm.aclose()
