"""Batched proposals (batched-GEPA): P parents x N children per step, e.g. "2x2" or "8x1".

A barrier-free engine has no steps to wait on, so the shape only says how parents are
drawn: P at a time from the current pool, each mutated N times, and how many proposals
may be in flight at once (P x N).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gepa_opt.pareto import Scores
from gepa_opt.selection import CandidateSelector


@dataclass(frozen=True)
class ProposalShape:
    parents: int
    children: int

    @property
    def width(self) -> int:
        """Proposals in flight at once."""
        return self.parents * self.children

    @classmethod
    def parse(cls, text: str) -> ProposalShape:
        match = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\d+)\s*", text)
        if not match or min(int(match[1]), int(match[2])) < 1:
            raise ValueError(f'a proposal shape is "PxN" with P, N >= 1 (e.g. "2x2"), got {text!r}')
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.parents}x{self.children}"


@dataclass
class ParentQueue:
    """Hands out parents: P drawn together from the pool as it is then, each N times."""

    shape: ProposalShape
    selector: CandidateSelector
    rng: random.Random
    _queue: list[int] = field(default_factory=list)

    def next(self, val_scores: Sequence[Scores]) -> int:
        if not self._queue:
            group = [self.selector.select(val_scores, self.rng) for _ in range(self.shape.parents)]
            self._queue = [parent for parent in group for _ in range(self.shape.children)]
        return self._queue.pop(0)
