"""Choice scoring: how likely each candidate answer is right after a prompt.

Concurrent calls are scored in one forward pass (`gathered`); the logits come from the
float32 head (`score_head`), so close answers do not tie.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from infra.lm.engine.batcher import Batcher
from infra.lm.engine.gathered import Gathered


@dataclass
class _Item:
    prompt: list[int]
    answers: list[list[int]]


class ChoiceScorer:
    def __init__(self, batcher: Batcher):
        self.batcher = batcher
        self._gathered = Gathered(batcher, self._score)

    async def score(self, prompt: list[int], answers: list[list[int]], adapter: Any) -> list[float]:
        """Sum of log-probabilities of each answer's tokens right after the prompt."""
        return await self._gathered(_Item(prompt, answers), adapter)

    def _score(self, items: list[_Item]) -> list[list[float]]:
        # When every answer is one token, the prompt's next-token distribution scores them
        # all from one row; otherwise one row per answer, prompt + answer.
        rows, reads = [], []  # reads[item][answer] = [(row, column from the end, token)]
        for item in items:
            if all(len(a) == 1 for a in item.answers):
                reads.append([[(len(rows), 1, a[0])] for a in item.answers])
                rows.append(item.prompt)
                continue
            reads.append([])
            for a in item.answers:
                # token j of the answer is predicted at column len(a) + 1 - j from the end
                reads[-1].append([(len(rows), len(a) + 1 - j, t) for j, t in enumerate(a)])
                rows.append(item.prompt + a)
        keep = [0] * len(rows)
        for per_answer in reads:
            for row, back, _ in (r for answer in per_answer for r in answer):
                keep[row] = max(keep[row], back)
        hidden = self.batcher.prefill(rows, keep)[0]
        where = [r for per_answer in reads for answer in per_answer for r in answer]
        picked = torch.stack([hidden[r][keep[r] - back] for r, back, _ in where])
        logits = self.batcher.weights().scores(picked.float())
        logp = torch.log_softmax(logits, -1)
        values = iter(logp[range(len(where)), [t for _, _, t in where]].tolist())
        return [
            [sum(next(values) for _ in answer) for answer in per_answer] for per_answer in reads
        ]
