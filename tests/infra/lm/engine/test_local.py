"""LocalLM on the real model: chat template, stops, logprobs, choice scoring, adapters."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from infra.lm.calls import ModelCallFailed
from infra.lm.engine.local import LocalLM, pick_dtype
from infra.lm.factory import make_lm
from infra.lm.openai_lm import OpenAILM
from infra.lm.protocol import LM, AdapterLM
from infra.settings import LMSettings
from tests.fakes import random_lora_adapter

ASK = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def lm():
    local = LocalLM(LMSettings(dtype="float32", batch_wait_ms=2))
    yield local
    local.close()


@pytest.fixture(scope="module")
def adapter_dir(lm, tmp_path_factory):
    return random_lora_adapter(lm.base_model_path, tmp_path_factory.mktemp("adapter"))


@pytest.fixture(scope="module")
def other_adapter_dir(lm, tmp_path_factory):
    return random_lora_adapter(lm.base_model_path, tmp_path_factory.mktemp("other"), seed=1)


def test_dtype_choice():
    assert pick_dtype("float32") is torch.float32
    assert pick_dtype("auto") in (torch.bfloat16, torch.float32)


def test_factory_picks_the_backend():
    assert isinstance(make_lm(LMSettings(backend="openai")), OpenAILM)


@pytest.mark.slow
async def test_complete(lm):
    assert isinstance(lm, LM) and isinstance(lm, AdapterLM)
    done = await lm.complete(ASK, max_tokens=16, logprobs=True)
    assert "Paris" in done.text and done.finish_reason == "stop"
    assert "<|im_end|>" not in done.text
    assert done.usage.prompt_tokens == len(lm.prompt_ids(ASK))
    assert done.usage.completion_tokens == len(done.token_logprobs) + 1  # + the end token
    cut = await lm.complete(ASK, max_tokens=16, stop=["Paris"])
    assert "Paris" not in cut.text and done.text.startswith(cut.text)
    short = await lm.complete(ASK, max_tokens=2)
    assert short.finish_reason == "length" and short.usage.completion_tokens == 2


@pytest.mark.slow
async def test_batch_equals_single(lm):
    other = [{"role": "user", "content": "Say hello to a friend in a long and friendly way."}]
    single = [(await lm.complete(m, max_tokens=8)).text for m in (ASK, other)]
    assert [c.text for c in await lm.complete_batch([ASK, other], max_tokens=8)] == single


@pytest.mark.slow
async def test_choice_logprobs_are_exact(lm):
    choices = ["Paris", "The capital of France is Paris.", "London"]
    scores = await lm.choice_logprobs(ASK, choices)
    prompt = lm.prompt_ids(ASK)
    for choice, score in zip(choices, scores, strict=True):
        answer = lm.tokenizer(choice, add_special_tokens=False).input_ids
        with torch.inference_mode():  # one unpadded forward per choice as the reference
            logits = lm.model(torch.tensor([prompt + answer])).logits[0].float()
        logp = torch.log_softmax(logits, -1)
        ref = sum(float(logp[len(prompt) - 1 + j, t]) for j, t in enumerate(answer))
        assert score == pytest.approx(ref, abs=1e-3)
    assert scores[0] > scores[2]


@pytest.mark.slow
async def test_a_prompt_longer_than_the_context_fails_alone_and_is_counted(lm):
    """A 5 MB body must not allocate gigabytes nor take its batch down: it is refused
    like a server's 400, and the requests beside it answer as they would alone."""
    huge = [{"role": "user", "content": "word " * (lm.batcher.max_positions + 10)}]
    alone = await lm.choice_logprobs(ASK, ["Yes", "No"])
    refused, beside, text = await asyncio.gather(
        lm.choice_logprobs(huge, ["Yes", "No"]),
        lm.choice_logprobs(ASK, ["Yes", "No"]),
        lm.complete(huge, max_tokens=4),
        return_exceptions=True,
    )
    assert isinstance(refused, ModelCallFailed) and refused.kind == "refused"
    assert isinstance(text, ModelCallFailed) and "context" in str(text)
    assert beside == alone
    assert lm.tally.stage("other").calls_failed["refused"] >= 2


@pytest.mark.slow
async def test_adapters_load_by_name_and_switch(lm, adapter_dir, other_adapter_dir):
    base = await lm.choice_logprobs(ASK, ["Paris"])
    assert await lm.adapters() == []
    await lm.load_adapter("random", adapter_dir)
    assert await lm.adapters() == ["random"]
    tuned = await lm.choice_logprobs(ASK, ["Paris"], adapter="random")
    assert tuned != pytest.approx(base)
    assert await lm.choice_logprobs(ASK, ["Paris"]) == base  # the base model again
    with_adapter = await lm.complete(ASK, max_tokens=4, adapter="random")
    assert with_adapter.usage.completion_tokens >= 1
    with pytest.raises(KeyError):
        await lm.complete(ASK, adapter="missing")
    with pytest.raises(KeyError):
        await lm.choice_logprobs(ASK, ["Paris"], adapter="missing")
    await lm.load_adapter("random", other_adapter_dir)  # the same name: replaced
    assert await lm.adapters() == ["random"]
    replaced = await lm.choice_logprobs(ASK, ["Paris"], adapter="random")
    assert replaced != pytest.approx(tuned)
    await lm.load_adapter("other", other_adapter_dir)
    assert await lm.choice_logprobs(ASK, ["Paris"], adapter="other") == replaced
    assert sorted(await lm.adapters()) == ["other", "random"]


@pytest.mark.slow
async def test_a_rested_engine_frees_its_weights_and_then_answers_the_same(lm, adapter_dir):
    """Resting drops every packed weight; the next call packs again what it needs, base
    and adapter alike, to the same bits."""
    await lm.load_adapter("kept", adapter_dir)
    reply = await lm.complete(ASK, max_tokens=6, logprobs=True)
    tuned = await lm.choice_logprobs(ASK, ["Paris"], adapter="kept")
    assert await lm.rest()
    assert lm.batcher.weight_sets == {} and lm.batcher.fused._base is None
    assert "kept" in await lm.adapters()  # still served, packed again on its next call
    lm.readings.forget("kept")  # else the reading cached before comes back, uncomputed
    assert await lm.choice_logprobs(ASK, ["Paris"], adapter="kept") == tuned
    assert list(lm.batcher.weight_sets) == ["kept"]  # only what was asked for
    again = await lm.complete(ASK, max_tokens=6, logprobs=True)
    assert (again.text, again.token_logprobs) == (reply.text, reply.token_logprobs)
    await lm.unload_adapter("kept")


@pytest.mark.slow
async def test_load_adapter_keeps_the_event_loop_serving(lm, adapter_dir):
    """peft's work runs on the engine's thread: the event loop keeps ticking while an
    adapter loads, and a request in flight still completes."""
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.005)

    loading: list[float] = []

    async def load() -> None:
        loading.append(time.monotonic())
        await lm.load_adapter("while-serving", adapter_dir)
        loading.append(time.monotonic())

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.02)
    answer, _ = await asyncio.gather(lm.complete(ASK, max_tokens=16), load())
    ticker.cancel()
    assert "while-serving" in await lm.adapters() and answer.text
    # the loop ticked all through the load: work on the loop's own thread would leave a
    # gap as long as itself. Measured against the load's own span, not in seconds, so it
    # holds however fast or slow (or busy) the machine
    start, end = loading
    during = [start, *(t for t in ticks if start < t < end), end]
    gaps = [b - a for a, b in zip(during, during[1:], strict=False)]
    assert len(during) >= 5 and max(gaps) < (end - start) / 2, (gaps, end - start)


@pytest.mark.slow
async def test_concurrent_choice_logprobs_equal_one_at_a_time(lm):
    rubric = (  # longer than one chunk of tokens, so that concurrent calls share it
        "You are a strict judge. Read the user's message and the assistant's reply, then say "
        "whether the reply answers the message correctly and politely. A reply that names "
        "the right city but is rude fails; a reply that is polite but wrong fails too. "
        "Answer Yes or No."
    )
    replies = ["Paris.", "London, I think.", "The capital of France is Paris!", "No idea."]
    calls = [
        (
            [{"role": "system", "content": rubric}, {"role": "user", "content": f"Q: {q} A: {r}"}],
            choices,
        )
        for q in ("What is the capital of France?", "Capital of France?")
        for r in replies
        for choices in (["Yes", "No"], ["Yes, it does", "No"])
    ]
    alone = [await lm.choice_logprobs(m, c) for m, c in calls]
    together = await asyncio.gather(*(lm.choice_logprobs(m, c) for m, c in calls))
    assert list(together) == alone
    assert len(lm.batcher.prefixes)  # the rubric was prefilled once and reused
