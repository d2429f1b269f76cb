"""What a run tells its listeners (`events.py`), built from the engine's own pieces.

Each event is built in one place, however many places of the run reach it, so two
announcements of the same thing cannot drift apart. Frontier changes are announced only
when real, so a caller can log one point per improvement.
"""

from __future__ import annotations

from collections.abc import Sequence

from gepa_opt.budget import Budget
from gepa_opt.events import (
    BudgetUsed,
    EventBus,
    Finished,
    FrontierChanged,
    GEPAEvent,
    ProposalAccepted,
    ProposalFinished,
    ProposalRejected,
    ProposalStarted,
    StopReason,
)
from gepa_opt.group import Plan, Trial
from gepa_opt.pareto import Scores, aggregate, best_index, frontier_score
from gepa_opt.state import GEPAState


class Announcer:
    def __init__(self, bus: EventBus, budget: Budget) -> None:
        self._bus = bus
        self._budget = budget
        self._frontier: tuple[object, ...] | None = None  # the last one announced

    async def emit(self, event: GEPAEvent) -> None:
        await self._bus.emit(event)

    async def started(self, plan: Plan, parent_idx: int) -> None:
        await self._bus.emit(
            ProposalStarted(
                iteration=plan.iteration,
                parent_idx=parent_idx,
                components=tuple(plan.components),
                minibatch_ids=tuple(i for i, _ in plan.draw.minibatch),
            )
        )

    async def rejected(self, trial: Trial, parent_idx: int) -> None:
        assert trial.reason is not None
        await self._bus.emit(
            ProposalRejected(
                iteration=trial.plan.iteration,
                parent_idx=parent_idx,
                reason=trial.reason,
                parent_minibatch_score=sum(trial.parent_eval.scores),
                child_minibatch_score=None
                if trial.child_eval is None
                else sum(trial.child_eval.scores),
            )
        )

    async def accepted(self, trial: Trial, parent_idx: int, val_score: float) -> None:
        assert trial.child_eval is not None and trial.candidate_idx is not None
        await self._bus.emit(
            ProposalAccepted(
                iteration=trial.plan.iteration,
                parent_idx=parent_idx,
                candidate_idx=trial.candidate_idx,
                components=trial.changed,
                parent_minibatch_score=sum(trial.parent_eval.scores),
                child_minibatch_score=sum(trial.child_eval.scores),
                val_score=val_score,
            )
        )

    async def finished(self, trial: Trial, parent_idx: int, seconds: float) -> None:
        await self._bus.emit(
            ProposalFinished(
                iteration=trial.plan.iteration,
                parent_idx=parent_idx,
                candidate_idx=trial.candidate_idx,
                reject_reason=trial.reason,
                metric_calls=trial.paid,
                seconds=seconds,
            )
        )

    async def budget_used(self, iteration: int, metric_calls: int, reflection_calls: int) -> None:
        budget = self._budget
        await self._bus.emit(
            BudgetUsed(
                iteration=iteration,
                metric_calls=metric_calls,
                reflection_calls=reflection_calls,
                metric_calls_used=budget.metric_calls_used,
                max_metric_calls=budget.max_metric_calls,
                reflection_calls_used=budget.reflection_calls,
            )
        )

    async def frontier(
        self, scores: Sequence[Scores], front: Sequence[int], iteration: int
    ) -> None:
        """`scores`: the pool's val scores; `front`: the candidates parents are drawn from."""
        best = best_index(scores)
        event = FrontierChanged(
            iteration=iteration,
            best_idx=best,
            best_score=aggregate(scores[best]),
            frontier_score=frontier_score(scores),
            pareto_candidates=tuple(front),
            num_candidates=len(scores),
        )
        key = (event.best_idx, event.frontier_score, event.pareto_candidates)
        if key != self._frontier:
            self._frontier = key
            await self._bus.emit(event)

    async def run_finished(self, state: GEPAState, stop: StopReason) -> None:
        best = best_index(state.val_scores)
        await self._bus.emit(
            Finished(
                iteration=state.iteration,
                reason=stop,
                best_idx=best,
                best_score=aggregate(state.val_scores[best]),
                num_candidates=len(state.candidates),
                metric_calls_used=self._budget.metric_calls_used,
                reflection_calls_used=self._budget.reflection_calls,
            )
        )
