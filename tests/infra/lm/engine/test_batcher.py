"""The decode engine on the real model: batched requests give the bits they get alone."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from infra.lm.engine import decode_attention
from infra.lm.engine.attention import CHUNK
from infra.lm.engine.batcher import Batcher, Request
from infra.lm.engine.prefix import common_prefix_len
from infra.lm.model_files import resolve_model_path

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


@pytest.fixture(scope="module")
def batcher(parts):
    model, tokenizer, _ = parts
    engine = Batcher(model, decode=tokenizer.decode, max_batch_size=3, batch_wait_ms=2)
    yield engine
    engine.close()


def greedy(prompt: list[int], n: int = 12, **kw) -> Request:
    return Request(prompt, n, stop_token_ids=frozenset({2}), **kw)


async def test_batched_greedy_equals_alone_to_the_bit(parts, batcher):
    _, _, prompts = parts

    def tokens_and_logprobs(generations) -> list:
        return [(g.token_ids, g.logprobs) for g in generations]

    alone = [await batcher.generate(greedy(p, want_logprobs=True)) for p in prompts]
    together = await asyncio.gather(
        *(batcher.generate(greedy(p, want_logprobs=True)) for p in prompts)
    )
    assert tokens_and_logprobs(together) == tokens_and_logprobs(alone)  # 3 rows: one joins late

    async def later(prompt: list[int], delay: float):
        await asyncio.sleep(delay)
        return await batcher.generate(greedy(prompt, want_logprobs=True))

    staggered = await asyncio.gather(*(later(p, 0.05 * i) for i, p in enumerate(prompts)))
    assert tokens_and_logprobs(staggered) == tokens_and_logprobs(alone)


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


async def test_seeded_sampling_repeats_alone_and_among_others(parts, batcher):
    _, _, prompts = parts
    req = Request(prompts[0], 8, temperature=1.0, seed=7)
    alone = await batcher.generate(req)
    first, _, second = await asyncio.gather(
        batcher.generate(req), batcher.generate(greedy(prompts[2])), batcher.generate(req)
    )
    assert first.token_ids == second.token_ids == alone.token_ids


async def test_errors_reach_the_caller_and_the_worker_survives(parts, batcher):
    _, _, prompts = parts
    with pytest.raises(IndexError):
        await batcher.generate(greedy([10**6], 2))  # not a token id: the forward fails
    with pytest.raises(ValueError):
        await batcher.generate(greedy([], 2))
    assert len((await batcher.generate(greedy(prompts[0], 2))).token_ids) == 2


async def test_adapters_switch_only_between_drained_groups(parts, batcher, monkeypatch):
    _, _, prompts = parts
    for name in ("a", "b"):
        await batcher.add_adapter(name, dict)  # the base weights again, as a set of their own
    switches = []
    switch = batcher._switch

    def spy(adapter):
        if adapter != batcher.adapter:
            switches.append((adapter, len(batcher.rows)))
        return switch(adapter)

    monkeypatch.setattr(batcher, "_switch", spy)
    adapters = ["a", None, "a", "b", None]
    results = await asyncio.gather(
        *(batcher.generate(greedy(prompts[i % 4], 4, adapter=a)) for i, a in enumerate(adapters))
    )
    base = [await batcher.generate(greedy(prompts[i % 4], 4)) for i in range(5)]
    assert [r.token_ids for r in results] == [b.token_ids for b in base]
    assert all(rows == 0 for _, rows in switches)  # never while rows of another adapter run
    assert [name for name, _ in switches] == ["a", None, "b", None]  # same adapters together
    with pytest.raises(KeyError, match="unknown adapter"):
        await batcher.generate(greedy(prompts[0], 2, adapter="missing"))


SYSTEM = (  # longer than one CHUNK of tokens: only whole chunks are shared
    "You are a careful assistant. Answer in one short sentence, name the user's intent "
    "first, then the reason, as in: play music -> PlayMusic because the user wants a song. "
    "Other intents are GetWeather, BookRestaurant, AddToPlaylist, RateBook, SearchScreeningEvent "
    "and SearchCreativeWork; when none fits, say Unknown and explain what is missing."
)


async def test_prefix_sharing_gives_the_same_bits(parts):
    """Rows prefilled after a shared prefix equal rows prefilled whole, to the bit."""
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
            decode=tokenizer.decode,
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

    (plain, _), (sharing, cache) = await run(10**9), await run(CHUNK)
    assert len(cache)  # the groups did share a prefix
    assert [(g.token_ids, g.logprobs) for g in sharing] == [
        (g.token_ids, g.logprobs) for g in plain
    ]
