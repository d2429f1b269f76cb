"""The run's state: the candidate pool with lineage and val scores, plus proposal history.

Plain data only (no adapter, no RNG), so a later version can persist and resume it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gepa_opt.events import RejectReason
from gepa_opt.pareto import ObjectiveScores, Scores
from gepa_opt.types import Candidate, ExampleId, candidate_digest


@dataclass(frozen=True)
class ProposalRecord:
    """One iteration of Algorithm 1, whatever its outcome."""

    iteration: int
    parent_idx: int
    components: tuple[str, ...]
    minibatch_ids: tuple[ExampleId, ...]
    parent_scores: tuple[float, ...]
    child_scores: tuple[float, ...] | None
    """None when the child was never evaluated (perfect parent, empty or duplicate)."""
    reject_reason: RejectReason | None
    """None when accepted."""
    candidate_idx: int | None
    """Pool index of the accepted child."""
    metric_calls: int = 0
    """What this proposal paid (cache hits and pairs another proposal computed are free)."""


@dataclass
class GEPAState:
    candidates: list[Candidate] = field(default_factory=list)
    parents: list[tuple[int, ...]] = field(default_factory=list)
    """Per candidate: () for the seed, (parent,) for a mutation, (i, j) for a merge."""
    val_scores: list[dict[ExampleId, float]] = field(default_factory=list)
    val_objective_scores: list[dict[ExampleId, dict[str, float]]] = field(default_factory=list)
    """Per candidate, per val example: named objective -> score ({} without objectives)."""
    component_cursor: list[int] = field(default_factory=list)
    """Per candidate: where its round-robin over components resumes."""
    history: list[ProposalRecord] = field(default_factory=list)
    iteration: int = 0
    """Proposals started so far."""
    idle_iterations: int = 0
    """Proposals in a row that cost no metric call (see GEPAConfig.max_idle_iterations)."""
    merges_tried: list[tuple[int, int, int]] = field(default_factory=list)
    """(i, j, common ancestor) of every merge attempted, so none is tried twice."""
    merges_due: int = 0
    """Accepted proposals not yet followed by a merge attempt."""
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    """Candidate digest -> pool index, for duplicate detection."""

    def add(
        self,
        candidate: Candidate,
        parents: tuple[int, ...],
        val_scores: Scores,
        val_objective_scores: ObjectiveScores | None = None,
    ) -> int:
        self._index[candidate_digest(candidate)] = len(self.candidates)
        self.candidates.append(dict(candidate))
        self.parents.append(parents)
        self.val_scores.append(dict(val_scores))
        self.val_objective_scores.append(
            {i: dict(scores) for i, scores in (val_objective_scores or {}).items()}
        )
        self.component_cursor.append(0)
        return len(self.candidates) - 1

    def contains(self, candidate: Candidate) -> bool:
        return candidate_digest(candidate) in self._index

    def index_of(self, candidate: Candidate) -> int:
        return self._index[candidate_digest(candidate)]
