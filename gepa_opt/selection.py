"""Which pool candidate to mutate next; one small strategy per name, as in upstream gepa."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from gepa_opt.pareto import Scores, best_index, win_counts

CandidateSelection = Literal["pareto", "current_best", "epsilon_greedy"]


class CandidateSelector(Protocol):
    def select(self, val_scores: Sequence[Scores], rng: random.Random) -> int:
        """Index of the parent for the next proposal."""
        ...


@dataclass(frozen=True)
class ParetoSelector:
    """Algorithm 2: sample ∝ instances won, so every distinct winning strategy keeps
    getting explored instead of the budget collapsing onto one local optimum."""

    def select(self, val_scores: Sequence[Scores], rng: random.Random) -> int:
        counts = win_counts(val_scores)
        candidates = list(counts)
        return rng.choices(candidates, weights=[counts[k] for k in candidates])[0]


@dataclass(frozen=True)
class CurrentBestSelector:
    """Greedy baseline (the paper's SelectBestCandidate ablation)."""

    def select(self, val_scores: Sequence[Scores], rng: random.Random) -> int:
        return best_index(val_scores)


@dataclass(frozen=True)
class EpsilonGreedySelector:
    """Greedy, but with probability `epsilon` any pool candidate, uniformly."""

    epsilon: float

    def select(self, val_scores: Sequence[Scores], rng: random.Random) -> int:
        if rng.random() < self.epsilon:
            return rng.randrange(len(val_scores))
        return best_index(val_scores)


def make_candidate_selector(name: CandidateSelection, epsilon: float) -> CandidateSelector:
    if name == "pareto":
        return ParetoSelector()
    if name == "current_best":
        return CurrentBestSelector()
    if name == "epsilon_greedy":
        return EpsilonGreedySelector(epsilon)
    raise ValueError(f"unknown candidate_selection {name!r}")
