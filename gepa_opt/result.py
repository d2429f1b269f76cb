"""What `optimize` returns: the whole pool with lineage and scores, not just the winner,
so callers can register runners-up or inspect how the prompt evolved."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gepa_opt.budget import Budget
from gepa_opt.events import RejectReason, StopReason
from gepa_opt.pareto import Pruning, aggregate, best_index, objective_means, win_counts
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.types import Candidate, ExampleId


@dataclass(frozen=True)
class PoolEntry:
    """One candidate of the pool, as a picture of the search draws it."""

    parents: tuple[int, ...]
    """Pool indices: () for the seed, (parent,) for a mutation, (i, j) for a merge."""
    val_score: float
    """Its mean over the valset."""
    found_at: int | None = None
    """The run's metric calls spent when it joined the pool, as its listener saw them
    (`BudgetUsed` before its `ProposalAccepted`); None: not seen."""


@dataclass(frozen=True)
class GEPAResult:
    candidates: list[Candidate]
    """The pool, in the order added; index 0 is the seed."""
    parents: list[tuple[int, ...]]
    val_subscores: list[dict[ExampleId, float]]
    """Per candidate, per val example id."""
    val_aggregate_scores: list[float]
    """Per candidate, mean over the valset."""
    val_objective_scores: list[dict[str, float]]
    """Per candidate, per named objective (`EvaluationBatch.objective_scores`), its mean
    over the valset; {} when the adapter reports no objectives."""
    best_idx: int
    """Highest aggregate val score (earliest on ties), as Algorithm 1 returns."""
    metric_calls_used: int
    max_metric_calls: int
    reflection_calls: int
    failed_calls: int
    """Tries that raised `CallFailed`: never scored, never charged (this process's)."""
    rejections: dict[RejectReason, int]
    stop_reason: StopReason
    history: list[ProposalRecord]
    """Proposals in the order they finished."""
    wall_seconds: float = field(default=0.0, compare=False)  # timing: not part of a replay
    worker_utilization: float = field(default=0.0, compare=False)
    """Busy slot-seconds of the `max_concurrency` pool over slot-seconds available."""

    @property
    def best_candidate(self) -> Candidate:
        return self.candidates[self.best_idx]

    @property
    def best_score(self) -> float:
        return self.val_aggregate_scores[self.best_idx]

    def front(self, pruning: Pruning = "coverage") -> dict[int, int]:
        """The Pareto front's candidates (by index), each with the number of val examples
        it is best on: the weights GEPA samples parents by."""
        return win_counts(self.val_subscores, pruning)

    def pool(self) -> tuple[PoolEntry, ...]:
        """Every candidate's lineage and val score, in pool order (no `found_at`: the result
        holds no clock of the run; a listener to its events does)."""
        return tuple(
            PoolEntry(tuple(parents), score)
            for parents, score in zip(self.parents, self.val_aggregate_scores, strict=True)
        )

    @property
    def accepted_proposals(self) -> int:
        return sum(len(parents) == 1 for parents in self.parents)

    @property
    def merged_candidates(self) -> int:
        return sum(len(parents) == 2 for parents in self.parents)

    @property
    def rejected_proposals(self) -> int:
        return sum(self.rejections.values())

    @property
    def empty_proposals(self) -> int:
        return self.rejections.get(RejectReason.EMPTY_PROPOSAL, 0)

    @classmethod
    def from_state(
        cls,
        state: GEPAState,
        budget: Budget,
        stop_reason: StopReason,
        wall_seconds: float = 0.0,
        worker_utilization: float = 0.0,
    ) -> GEPAResult:
        reasons = Counter(r.reject_reason for r in state.history if r.reject_reason is not None)
        return cls(
            candidates=[dict(c) for c in state.candidates],
            parents=list(state.parents),
            val_subscores=[dict(s) for s in state.val_scores],
            val_aggregate_scores=[aggregate(s) for s in state.val_scores],
            val_objective_scores=[objective_means(o) for o in state.val_objective_scores],
            best_idx=best_index(state.val_scores),
            metric_calls_used=budget.metric_calls_used,
            max_metric_calls=budget.max_metric_calls,
            reflection_calls=budget.reflection_calls,
            failed_calls=budget.failed_calls,
            rejections={reason: reasons[reason] for reason in RejectReason if reason in reasons},
            stop_reason=stop_reason,
            history=list(state.history),
            wall_seconds=wall_seconds,
            worker_utilization=worker_utilization,
        )
