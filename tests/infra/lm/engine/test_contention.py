"""A request's answer does not depend on the CPU's load: beside processes that hold every
core, the engine drops to one thread (`thread_governor`) and requests arrive at other
moments, so they share other steps; their tokens and log-probabilities keep their bits.

Prompts are 64k + 1 and 64k + 3 tokens long on purpose: their last attention chunk has 1
or 3 queries, the shapes whose bits PyTorch's CPU attention changed with the thread count
(AMD EPYC, AVX2, fp32) before a prompt's attention ran on all threads always."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from infra.lm.engine.batcher import Generation, Request
from infra.lm.engine.local import LocalLM
from infra.settings import LMSettings

pytestmark = pytest.mark.slow

LENGTHS = [65, 67, 129, 131, 193, 259, 70, 100]  # 64k + 1 or + 3 tokens, and two others
NEW_TOKENS = [24, 8, 16, 24, 12, 20, 24, 6]  # finishing apart: the slab narrows and widens


@pytest.fixture(scope="module")
def lm() -> Iterator[LocalLM]:
    local = LocalLM(LMSettings())
    yield local
    local.close()


@pytest.fixture(scope="module")
def requests(lm) -> list[Request]:
    text = " ".join(f"Item {i}: the fox jumps over the dog number {i}." for i in range(80))
    ids = lm.tokenizer(text)["input_ids"]
    assert len(ids) > max(LENGTHS)
    return [
        Request(ids[:n], new, stop_token_ids=lm.stop_token_ids, want_logprobs=True)
        for n, new in zip(LENGTHS, NEW_TOKENS, strict=True)
    ]


def answers(done: list[Generation]) -> list[tuple[list[int], list[float] | None]]:
    return [(g.token_ids, g.logprobs) for g in done]


async def one_at_a_time(lm: LocalLM, requests: list[Request]) -> list[Generation]:
    return [await lm.batcher.generate(r) for r in requests]


async def arriving_apart(lm: LocalLM, requests: list[Request], seed: int) -> list[Generation]:
    delays = random.Random(seed).sample([i * 0.05 for i in range(len(requests))], len(requests))

    async def later(request: Request, delay: float) -> Generation:
        await asyncio.sleep(delay)
        return await lm.batcher.generate(request)

    return list(await asyncio.gather(*map(later, requests, delays)))


@contextmanager
def cpu_hog() -> Iterator[None]:
    """A busy loop on every core this process may use."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(len(os.sched_getaffinity(0)))
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.skipif(torch.get_num_threads() < 2, reason="one thread: nothing to drop to")
async def test_a_prompt_ending_in_a_short_chunk_keeps_its_bits_on_one_thread(lm, requests):
    all_threads = await one_at_a_time(lm, requests)
    threads = lm.batcher.call_blocking(torch.get_num_threads)
    lm.batcher.call_blocking(lambda: torch.set_num_threads(1))  # as the governor does
    try:
        one_thread = await one_at_a_time(lm, requests)
    finally:
        lm.batcher.call_blocking(lambda: torch.set_num_threads(threads))
    assert answers(one_thread) == answers(all_threads)


async def test_replies_beside_a_cpu_hog_equal_the_replies_alone(lm, requests):
    governor = lm.batcher.governor
    adapting = governor.enabled
    # the replies alone on all threads, whatever else this machine runs now
    governor.enabled = False
    lm.batcher.call_blocking(governor.reset)
    alone = await one_at_a_time(lm, requests)
    governor.enabled = adapting
    lm.batcher.call_blocking(governor.reset)
    drops_before = governor.drops
    with cpu_hog():
        for seed in (1, 2):
            assert answers(await arriving_apart(lm, requests, seed)) == answers(alone), seed
    if adapting:  # the contended path really ran: the engine went down to one thread
        assert governor.drops > drops_before
