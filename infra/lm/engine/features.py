"""A prompt's features: the final hidden state at its last token, after the final norm.

A reward-model judge fits a logistic head on them. They are what the prefill computes
before the vocabulary head, so concurrent calls share one prefill pass (`gathered`) and,
like every prefill, a prompt's features are the same bits alone and among others.
"""

from __future__ import annotations

from typing import Any

from infra.lm.engine.batcher import Batcher
from infra.lm.engine.gathered import Gathered


class FeatureReader:
    def __init__(self, batcher: Batcher):
        self.batcher = batcher
        self._gathered = Gathered(batcher, self._read)

    async def read(self, prompt: list[int], adapter: Any) -> list[float]:
        """The final normed hidden state at the prompt's last token, as floats."""
        return await self._gathered(prompt, adapter)

    def _read(self, prompts: list[list[int]]) -> list[list[float]]:
        hidden, _ = self.batcher.prefill(prompts, [1] * len(prompts))
        return [h[-1].float().tolist() for h in hidden]
