"""The decode engine on the real model, in float32 so batched greedy must equal alone."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from infra.lm import decode_attention
from infra.lm.batcher import Batcher, Request
from infra.lm.model_files import resolve_model_path
from infra.lm.prefix import common_prefix_len

pytestmark = pytest.mark.slow

QUESTIONS = [
    "hi",
    "What is the capital of France?",
    "Write a haiku about the sea, the moon and the stars above us all tonight.",
    "Explain gravity to a child in two sentences, with an example about apples.",
]


@pytest.fixture(scope="module")
def parts():
    path = resolve_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation=decode_attention.NAME
    ).eval()
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, return_dict=False
        )
        for q in QUESTIONS
    ]
    return model, tokenizer, prompts


@pytest.fixture
def switches() -> list:
    return []


@pytest.fixture
def batcher(parts, switches):
    model, tokenizer, _ = parts
    engine = Batcher(
        model,
        pad_token_id=2,
        decode=tokenizer.decode,
        activate_adapter=lambda name: switches.append((name, len(engine.rows))),
        max_batch_size=3,
        batch_wait_ms=2,
    )
    yield engine
    engine.close()


def greedy(prompt: list[int], n: int = 12, **kw) -> Request:
    return Request(prompt, n, stop_token_ids=frozenset({2}), **kw)


async def test_batched_greedy_equals_alone(parts, batcher):
    _, _, prompts = parts
    alone = [(await batcher.generate(greedy(p))).token_ids for p in prompts]
    together = await asyncio.gather(*(batcher.generate(greedy(p)) for p in prompts))
    assert [g.token_ids for g in together] == alone  # 4 requests, 3 rows: one joins late

    async def later(prompt: list[int], delay: float):
        await asyncio.sleep(delay)
        return await batcher.generate(greedy(prompt))

    staggered = await asyncio.gather(*(later(p, 0.05 * i) for i, p in enumerate(prompts)))
    assert [g.token_ids for g in staggered] == alone


async def test_matches_transformers_generate(parts, batcher):
    model, _, prompts = parts
    ours = await batcher.generate(greedy(prompts[2], 8))
    model.set_attn_implementation("sdpa")  # the reference: transformers' own attention
    try:
        with torch.inference_mode():
            ref = model.generate(torch.tensor([prompts[2]]), max_new_tokens=8, do_sample=False)
    finally:
        model.set_attn_implementation(decode_attention.NAME)
    assert ours.token_ids == ref[0, len(prompts[2]) :].tolist()


async def test_stops_lengths_and_logprobs(parts, batcher):
    _, tokenizer, prompts = parts
    short = await batcher.generate(greedy(prompts[1], 3, want_logprobs=True, top_logprobs=2))
    assert short.finish_reason == "length" and len(short.token_ids) == 3
    assert len(short.logprobs) == 3 and all(lp <= 0 for lp in short.logprobs)
    assert [len(t) for t in short.top_logprobs] == [2, 2, 2]
    assert short.top_logprobs[0][0] == (short.token_ids[0], pytest.approx(short.logprobs[0]))
    assert short.prompt_tokens == len(prompts[1])

    full = await batcher.generate(greedy(prompts[1], 30))
    assert full.finish_reason == "stop" and full.token_ids[-1] == 2
    word = tokenizer.decode(full.token_ids[:4]).split()[-1]
    cut = await batcher.generate(greedy(prompts[1], 30, stop_strings=(word,)))
    assert cut.finish_reason == "stop" and word in tokenizer.decode(cut.token_ids)
    assert len(cut.token_ids) <= 4


async def test_seeded_sampling_repeats(parts, batcher):
    _, _, prompts = parts
    req = Request(prompts[0], 8, temperature=1.0, seed=7)
    first, second = await asyncio.gather(batcher.generate(req), batcher.generate(req))
    assert first.token_ids == second.token_ids


async def test_errors_reach_the_caller_and_the_worker_survives(parts, batcher):
    _, _, prompts = parts
    with pytest.raises(IndexError):
        await batcher.generate(greedy([10**6], 2))  # not a token id: the forward fails
    with pytest.raises(ValueError):
        await batcher.generate(greedy([], 2))
    assert len((await batcher.generate(greedy(prompts[0], 2))).token_ids) == 2


async def test_adapters_switch_only_between_drained_groups(parts, batcher, switches):
    _, _, prompts = parts
    adapters = ["a", None, "a", "b", None]
    results = await asyncio.gather(
        *(batcher.generate(greedy(prompts[i % 4], 4, adapter=a)) for i, a in enumerate(adapters))
    )
    assert all(len(r.token_ids) >= 1 for r in results)
    assert all(rows == 0 for _, rows in switches)  # never while rows of another adapter run
    assert [name for name, _ in switches] == ["a", None, "b"]  # same adapters run together


SYSTEM = (
    "You are a careful assistant. Answer in one short sentence, name the user's intent "
    "first, then the reason, as in: play music -> PlayMusic because the user wants a song."
)


async def test_prefix_sharing_is_exact(parts):
    """Rows prefilled after a shared prefix equal rows prefilled whole (float32)."""
    model, tokenizer, _ = parts

    def chat(system: str, user: str) -> list[int]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=False
        )

    shared = [chat(SYSTEM, q) for q in QUESTIONS]
    other = [chat("Translate the user's message into French, word for word.", q) for q in QUESTIONS]
    whole = shared[0][: common_prefix_len(shared[0], shared[1])]  # only what all share
    prompts = [*shared, whole, *other[:2]]
    requests = [Request(p, 6, want_logprobs=True) for p in prompts]

    async def run(min_shared: int) -> list:
        engine = Batcher(
            model,
            pad_token_id=2,
            decode=tokenizer.decode,
            activate_adapter=lambda _: None,
            max_batch_size=8,
            batch_wait_ms=50,
            min_shared_prefix=min_shared,
        )
        try:
            first = await asyncio.gather(*(engine.generate(r) for r in requests))
            later = await engine.generate(requests[2])  # alone, from the prefix cache
            return [*first, later], engine.prefixes
        finally:
            engine.close()

    (plain, _), (sharing, cache) = await run(10**9), await run(32)
    assert cache._entries  # the groups did share a prefix
    assert [g.token_ids for g in sharing] == [g.token_ids for g in plain]
    for a, b in zip(sharing, plain, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
