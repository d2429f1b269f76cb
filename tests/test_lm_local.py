"""LocalLM on the real model: chat template, stops, logprobs, choice scoring, adapters."""

from __future__ import annotations

import asyncio

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from infra.lm.factory import make_lm
from infra.lm.local import LocalLM, pick_dtype
from infra.lm.openai_lm import OpenAILM
from infra.lm.protocol import LM
from infra.settings import LMSettings

ASK = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def lm():
    local = LocalLM(LMSettings(dtype="float32", batch_wait_ms=2))
    yield local
    local.close()


@pytest.fixture(scope="module")
def adapter_dir(lm, tmp_path_factory):
    """A random (non-identity) LoRA adapter saved the way weights/ saves one."""
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(lm.model_path, dtype=torch.float32)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    path = tmp_path_factory.mktemp("adapter")
    get_peft_model(base, config).save_pretrained(path)
    return path


def test_dtype_choice():
    assert pick_dtype("float32") is torch.float32
    assert pick_dtype("auto") in (torch.bfloat16, torch.float32)


def test_factory_picks_the_backend():
    assert isinstance(make_lm(LMSettings(backend="openai")), OpenAILM)


@pytest.mark.slow
async def test_complete(lm):
    assert isinstance(lm, LM)
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
async def test_adapters_load_by_name_and_switch(lm, adapter_dir):
    base = await lm.choice_logprobs(ASK, ["Paris"])
    lm.load_adapter("random", adapter_dir)
    assert lm.adapters == ["random"]
    tuned = await lm.choice_logprobs(ASK, ["Paris"], adapter="random")
    assert tuned != pytest.approx(base)
    assert await lm.choice_logprobs(ASK, ["Paris"]) == base  # the base model again
    with_adapter = await lm.complete(ASK, max_tokens=4, adapter="random")
    assert with_adapter.usage.completion_tokens >= 1
    with pytest.raises(KeyError):
        await lm.complete(ASK, adapter="missing")


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
