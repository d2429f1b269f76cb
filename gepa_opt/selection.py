"""Which pool candidate to mutate next; one small strategy per name, as in upstream gepa."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from gepa_opt.pareto import Pruning, Scores, best_index, win_counts

CandidateSelection = Literal["pareto", "current_best", "epsilon_greedy"]


class CandidateSelector(Protocol):
    def select(
        self,
        val_scores: Sequence[Scores],
        rng: random.Random,
        frontier: Sequence[Scores] | None = None,
        allowed: Collection[int] | None = None,
    ) -> int | None:
        """Index of the parent for the next proposal, or None when no candidate it would
        pick is in `allowed` (None: any). `val_scores` are per val instance; `frontier`
        holds each candidate's scores on the Pareto frontier's keys
        (`pareto.frontier_scores`), `val_scores` themselves when None."""
        ...


@dataclass(frozen=True)
class ParetoSelector:
    """Algorithm 2: sample ∝ frontier keys won (instances in the paper), so every distinct
    winning strategy keeps getting explored instead of the budget collapsing onto one
    local optimum. `pruning` says which candidates stay parents (`pareto.Pruning`)."""

    pruning: Pruning = "dominance"

    def select(
        self,
        val_scores: Sequence[Scores],
        rng: random.Random,
        frontier: Sequence[Scores] | None = None,
        allowed: Collection[int] | None = None,
    ) -> int | None:
        counts = win_counts(val_scores if frontier is None else frontier, self.pruning)
        candidates = [k for k in counts if allowed is None or k in allowed]
        if not candidates:
            return None
        return rng.choices(candidates, weights=[counts[k] for k in candidates])[0]


@dataclass(frozen=True)
class CurrentBestSelector:
    """Greedy baseline (the paper's SelectBestCandidate ablation)."""

    def select(
        self,
        val_scores: Sequence[Scores],
        rng: random.Random,
        frontier: Sequence[Scores] | None = None,
        allowed: Collection[int] | None = None,
    ) -> int | None:
        best = best_index(val_scores)
        return best if allowed is None or best in allowed else None


@dataclass(frozen=True)
class EpsilonGreedySelector:
    """Greedy, but with probability `epsilon` any pool candidate, uniformly."""

    epsilon: float

    def select(
        self,
        val_scores: Sequence[Scores],
        rng: random.Random,
        frontier: Sequence[Scores] | None = None,
        allowed: Collection[int] | None = None,
    ) -> int | None:
        if rng.random() < self.epsilon:
            pick = rng.randrange(len(val_scores))
        else:
            pick = best_index(val_scores)
        return pick if allowed is None or pick in allowed else None


def make_candidate_selector(
    name: CandidateSelection, epsilon: float, pruning: Pruning = "dominance"
) -> CandidateSelector:
    if name == "pareto":
        return ParetoSelector(pruning)
    if name == "current_best":
        return CurrentBestSelector()
    if name == "epsilon_greedy":
        return EpsilonGreedySelector(epsilon)
    raise ValueError(f"unknown candidate_selection {name!r}")
