"""Batched proposals (batched-GEPA): P parents x N children per step, e.g. "2x2" or "8x1".

A barrier-free engine has no steps to wait on, so the shape only says how parents are
drawn: P at a time from the current pool, each with one minibatch that its N children
share (the parent is paid for once per minibatch), and how many proposals may be in
flight at once (P x N).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gepa_opt.pareto import Scores
from gepa_opt.selection import CandidateSelector
from gepa_opt.types import ExampleId


@dataclass(frozen=True)
class ProposalShape:
    parents: int
    """P: parents drawn together, each with one minibatch its children share."""
    children: int
    """N: children reflected from each parent on that minibatch."""

    def __post_init__(self) -> None:
        for name in ("parents", "children"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ProposalShape.{name} must be an integer >= 1, got {value!r}")

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
    """Hands out (parent, minibatch): P parents drawn together from the pool as it is
    then, each with a minibatch of its own, each pair N times."""

    shape: ProposalShape
    selector: CandidateSelector
    rng: random.Random
    next_minibatch: Callable[[], list[ExampleId]]
    queued: list[tuple[int, list[ExampleId]]] = field(default_factory=list)
    """Drawn but not yet handed out (saved with the run state)."""

    def next(
        self, val_scores: Sequence[Scores], frontier: Sequence[Scores] | None = None
    ) -> tuple[int, list[ExampleId]]:
        """`frontier`: per candidate, its scores on the Pareto keys (see CandidateSelector)."""
        if not self.queued:
            for _ in range(self.shape.parents):
                parent = self.selector.select(val_scores, self.rng, frontier)
                pair = (parent, self.next_minibatch())
                self.queued += [pair] * self.shape.children
        return self.queued.pop(0)
