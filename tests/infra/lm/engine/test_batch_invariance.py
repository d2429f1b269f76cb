"""A request's answer does not depend on what it is batched with: greedy tokens, their
log-probabilities, choice scores and seeded samples, alone and among 7 other prompts of
other lengths, in the dtype this CPU runs (bf16 where it is native)."""

from __future__ import annotations

import asyncio

import pytest

from infra.lm.engine.local import LocalLM
from infra.settings import LMSettings
from judges.pass_fail_fit import fit_and_validate
from judges.pointwise import SEED_JUDGE_PROMPTS
from judges.types import JudgedItem

pytestmark = pytest.mark.slow

ASKS = [
    "hi",
    "What is the capital of France?",
    "Write a haiku about the sea, the moon and the stars above us all tonight.",
    "Explain gravity to a child in two sentences, with an example about apples.",
    "List three fruits.",
    "Say hello to a friend in a long and friendly way, mentioning the weather and a book.",
    "Translate 'good morning' into French.",
    "What is 2+2? Answer with the number, then explain how you got it step by step.",
]


@pytest.fixture(scope="module")
def lm():
    local = LocalLM(LMSettings(batch_wait_ms=20))
    yield local
    local.close()


def chats(asks: list[str]) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": a}] for a in asks]


async def test_the_engine_checked_this_cpu(lm):
    assert lm.batcher.plan.checked and lm.batcher.plan.invariant, lm.describe()


async def test_greedy_tokens_and_logprobs_alone_equal_a_batch_of_8(lm):
    lengths = [8, 40, 24, 32, 6, 40, 12, 20]

    async def run(messages, n):
        done = await lm.complete(messages, max_tokens=n, logprobs=True)
        return done.text, done.token_logprobs

    alone = [await run(m, n) for m, n in zip(chats(ASKS), lengths, strict=True)]
    together = await asyncio.gather(*(run(m, n) for m, n in zip(chats(ASKS), lengths, strict=True)))
    assert list(together) == alone


async def test_choice_scores_alone_equal_a_batch_of_8(lm):
    rubric = [{"role": "system", "content": "Answer Yes if the request is polite, else No."}]
    calls = [rubric + m for m in chats(ASKS)]
    choices = ["Yes", "No", "Yes, it is"]
    alone = [await lm.choice_logprobs(c, choices) for c in calls]
    assert list(await asyncio.gather(*(lm.choice_logprobs(c, choices) for c in calls))) == alone


async def test_a_seeded_sample_alone_equals_the_same_sample_in_a_batch(lm):
    ask = chats(ASKS[3:4])[0]
    alone = await lm.complete(ask, max_tokens=24, temperature=0.9, seed=11)
    together = await asyncio.gather(
        *(lm.complete(m, max_tokens=16) for m in chats(ASKS[:3])),
        lm.complete(ask, max_tokens=24, temperature=0.9, seed=11),
    )
    assert together[-1].text == alone.text


async def test_one_rubric_fits_one_threshold_and_kappa_whatever_the_batches(lm):
    """The judge's calibration sees one number per text: all calls in flight together, or
    two at a time in reverse order, give the same threshold and kappa."""
    items = [
        JudgedItem(f"t{i}", ask, reply, human_pass=i % 3 != 0)
        for i, (ask, reply) in enumerate(
            (a, r) for a in ASKS for r in ("Sure, here it is.", "I cannot help with that.")
        )
    ]
    train, val = items[::2], items[1::2]

    class TwoAtATime:
        def __init__(self):
            self.gate = asyncio.Semaphore(2)

        async def choice_logprobs(self, messages, choices, adapter=None):
            async with self.gate:
                return await lm.choice_logprobs(messages, choices, adapter)

    together = await fit_and_validate(lm, SEED_JUDGE_PROMPTS, train, val)
    apart = await fit_and_validate(TwoAtATime(), SEED_JUDGE_PROMPTS, train[::-1], val[::-1])
    assert apart == together
