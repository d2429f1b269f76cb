"""A small typed event stream, so callers drive progress bars and metric logging from it.

Every event carries the proposal `iteration` it belongs to (0 for the seed), a natural
step for MLflow metrics.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from gepa_opt.types import ExampleId


class RejectReason(StrEnum):
    PERFECT_PARENT = "perfect_parent"
    """Parent already perfect on the minibatch (`skip_perfect_score`): nothing to learn."""
    EMPTY_PROPOSAL = "empty_proposal"
    """The reflection LM proposed no text for any component."""
    REFUSED = "refused"
    """Every proposed text was refused (`gepa_opt.refusal`): it restates the reflection
    meta-prompt (`GEPAConfig.refuse_meta_restatements`), or the adapter refused it
    (`Adapter.refuses`). No metric call is spent on it."""
    UNCHANGED = "unchanged"
    """Every proposed text equals the parent's: a reflection that returned the component
    as it was, or a demonstrations component with nothing to add for the minibatch's
    failures and nothing over its budget (`Demonstrations`). No metric call is spent."""
    DUPLICATE = "duplicate"
    """The child's texts equal a candidate already in the pool."""
    NOT_IMPROVED = "not_improved"
    """Child's minibatch sum not strictly above the parent's."""
    NO_BUDGET = "no_budget"
    """The child improved, but the budget left cannot pay for its valset pass."""
    FAILED_CALLS = "failed_calls"
    """A call this proposal needed kept failing (`GEPAConfig.call_attempts` tries of an
    example, or its reflection): it has no score to be judged by."""
    SIBLING_BETTER = "sibling_better"
    """The child improved, but a sibling (same parent, same minibatch) improved more, and
    `GEPAConfig.siblings="best"` sends only the best one to the valset."""
    OUTPACED = "outpaced"
    """A sibling improved while this child's reflection was still out
    (`GEPAConfig.siblings` "first", or "auto" acting as it): the reflection was
    cancelled, no metric call spent."""


class StopReason(StrEnum):
    BUDGET = "budget"
    """The next proposal's worst-case cost no longer fits in `max_metric_calls`."""
    REFLECTION_BUDGET = "reflection_budget"
    """The next proposal's reflections no longer fit in `max_reflection_calls`."""
    FAILED_CALLS = "failed_calls"
    """More failed calls than `GEPAConfig.max_failed_calls`: the system under
    optimization (or the reflection LM) is down, and waiting will not score anything."""
    STALLED = "stalled"
    """`max_idle_iterations` proposals in a row cost nothing: no progress is possible."""
    # GEPAConfig.stop (`stopping.StopRules`), in the order they are checked:
    STOP_FILE = "stop_file"
    """An operator created `StopRules.stop_file`: their explicit request is reported first."""
    SCORE_TARGET = "score_target"
    """The best aggregate val score reached the target: success beats any limit also hit."""
    COST = "cost"
    """Money spent reached `max_cost_usd`: the most expensive limit to overrun."""
    TOKENS = "tokens"
    """Prompt + completion tokens reached `max_tokens`."""
    WALL_TIME = "wall_time"
    """Seconds since the run started reached `max_wall_s`."""
    NO_IMPROVEMENT = "no_improvement"
    """`max_proposals_without_improvement` proposals finished since the best score rose:
    a heuristic, so any hard limit that also holds is the better explanation."""


@dataclass(frozen=True)
class ProposalStarted:
    iteration: int
    parent_idx: int
    components: tuple[str, ...]
    minibatch_ids: tuple[ExampleId, ...]


@dataclass(frozen=True)
class ProposalRejected:
    iteration: int
    parent_idx: int
    reason: RejectReason
    parent_minibatch_score: float
    """Sum over the minibatch (the acceptance test compares sums)."""
    child_minibatch_score: float | None
    """None when the child was never evaluated."""


@dataclass(frozen=True)
class ProposalAccepted:
    iteration: int
    parent_idx: int
    candidate_idx: int
    components: tuple[str, ...]
    """Components whose text the child changed."""
    parent_minibatch_score: float
    child_minibatch_score: float
    val_score: float
    """The child's aggregate (mean) score on the valset."""


@dataclass(frozen=True)
class ProposalFinished:
    """The last event of every proposal, after its ProposalAccepted or ProposalRejected."""

    iteration: int
    parent_idx: int
    candidate_idx: int | None
    """Pool index of the accepted child, else None."""
    reject_reason: RejectReason | None
    metric_calls: int
    """Metric calls this proposal paid for (cache hits and pairs others computed are free)."""
    seconds: float = field(compare=False)
    """Wall time from its start, waits for slots and budget included (not compared: a
    replayed run is equal though its clock differs)."""


@dataclass(frozen=True)
class MergeTried:
    iteration: int
    i: int
    j: int
    ancestor: int
    subsample_score: float
    """The merged candidate's sum over the subsample."""
    parents_best_subsample_score: float
    candidate_idx: int | None
    """Pool index when admitted, else None."""


@dataclass(frozen=True)
class FrontierChanged:
    iteration: int
    best_idx: int
    best_score: float
    frontier_score: float
    """Mean over val instances of the best score any candidate reached on it."""
    pareto_candidates: tuple[int, ...]
    """Candidates Algorithm 2 can select (best somewhere, not dominated)."""
    num_candidates: int


@dataclass(frozen=True)
class BudgetUsed:
    iteration: int
    metric_calls: int
    reflection_calls: int
    metric_calls_used: int
    max_metric_calls: int
    reflection_calls_used: int


@dataclass(frozen=True)
class Finished:
    iteration: int
    reason: StopReason
    best_idx: int
    best_score: float
    num_candidates: int
    metric_calls_used: int
    reflection_calls_used: int


GEPAEvent = (
    ProposalStarted
    | ProposalRejected
    | ProposalAccepted
    | ProposalFinished
    | MergeTried
    | FrontierChanged
    | BudgetUsed
    | Finished
)

EventHandler = Callable[[GEPAEvent], Awaitable[None] | None]
"""Sync or async; called in registration order, awaited before the run goes on."""


class EventBus:
    def __init__(self, handlers: EventHandler | Iterable[EventHandler] | None) -> None:
        if handlers is None:
            handlers = ()
        elif callable(handlers):
            handlers = (handlers,)
        self._handlers = tuple(handlers)

    async def emit(self, event: GEPAEvent) -> None:
        for handler in self._handlers:
            outcome = handler(event)
            if inspect.isawaitable(outcome):
                await outcome
