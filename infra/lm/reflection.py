"""An LM as the optimizer's reflection model: one prompt in, text out."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable

from infra.lm.protocol import LM


def reflection_lm(lm: LM, max_tokens: int, seed: int = 0) -> Callable[[str], Awaitable[str]]:
    """Sampled replies, seeded per call (seed, seed + 1, ...): a run replays, and the N
    children GEPA reflects from one parent on one minibatch get N different proposals."""
    calls = itertools.count(seed)

    async def reflect(prompt: str) -> str:
        completion = await lm.complete(
            [{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            temperature=0.7,
            seed=next(calls),
        )
        return completion.text

    return reflect
