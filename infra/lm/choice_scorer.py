"""Choice scoring for concurrent callers in one forward pass.

A judge scores many items at once, each call asking how likely "Yes" and "No" are after
its prompt. Calls that arrive while the worker is busy wait together and are scored in
one prefill, on top of the prefix they share (the judge's rubric). A call's scores are
the same bits alone and among others (see `batcher`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch

from infra.lm.batcher import Batcher


@dataclass
class _Item:
    prompt: list[int]
    answers: list[list[int]]
    scores: list[float] | None = None
    error: BaseException | None = None


class ChoiceScorer:
    def __init__(self, batcher: Batcher):
        self.batcher = batcher
        self._waiting: dict[Any, list[_Item]] = {}  # per adapter
        self._lock = threading.Lock()

    async def score(self, prompt: list[int], answers: list[list[int]], adapter: Any) -> list[float]:
        """Sum of log-probabilities of each answer's tokens right after the prompt."""
        item = _Item(prompt, answers)
        with self._lock:
            self._waiting.setdefault(adapter, []).append(item)
        # Whichever job of this adapter runs first scores every item waiting by then.
        await self.batcher.call(lambda: self._drain(adapter), adapter)
        if item.error is not None:
            raise item.error
        return item.scores

    def _drain(self, adapter: Any) -> None:
        with self._lock:
            items = self._waiting.pop(adapter, [])
        if not items:
            return
        try:
            for item, scores in zip(items, self._score(items), strict=True):
                item.scores = scores
        except Exception as error:
            for item in items:
                item.error = error

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
        logits = self.batcher.score_head(self.batcher.adapter)(picked.float())
        logp = torch.log_softmax(logits, -1)
        values = iter(logp[range(len(where)), [t for _, _, t in where]].tolist())
        return [
            [sum(next(values) for _ in answer) for answer in per_answer] for per_answer in reads
        ]
