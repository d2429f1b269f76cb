"""Line 14 of Algorithm 1: a winner's valset pass, and its joining the pool.

Kept apart from the group that found the winner because the two are timed apart: the
pass starts as soon as the child has won, but joining the pool waits for the parent's
own place in it (a continued group's parent may still be in its valset pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gepa_opt.announcer import Announcer
from gepa_opt.budget import Reservation
from gepa_opt.cache import Split
from gepa_opt.evaluator import Example
from gepa_opt.events import RejectReason
from gepa_opt.group import Trial
from gepa_opt.metric_calls import MetricCalls
from gepa_opt.pareto import aggregate
from gepa_opt.pool import Pool
from gepa_opt.state import GEPAState
from gepa_opt.tuning import Tuning
from gepa_opt.types import CallFailed, EvaluationBatch


@dataclass(frozen=True)
class Admission:
    state: GEPAState
    pool: Pool
    calls: MetricCalls
    tuning: Tuning
    announcer: Announcer
    valset: Sequence[Example]

    async def valset_pass(
        self, trial: Trial, valset: Reservation | None
    ) -> EvaluationBatch | RejectReason:
        """The winner's valset pass (reserved here unless it already was), or why there
        is none."""
        assert trial.child is not None
        valset = valset or await self.calls.reserve_valset(trial.child)
        if valset is None:
            return RejectReason.NO_BUDGET
        reserved = valset.left
        try:
            return await self.calls.evaluate(
                trial.child, Split.VAL, self.valset, valset, trial.plan.iteration
            )
        except CallFailed:
            return RejectReason.FAILED_CALLS
        finally:
            trial.paid += reserved - valset.left
            valset.release()

    async def admit(
        self, trial: Trial, val: EvaluationBatch | RejectReason, parent_idx: int
    ) -> None:
        """The winner joins the pool with its valset scores, unless its pass failed or a
        concurrent proposal wrote the same text first."""
        assert trial.child is not None and trial.child_eval is not None
        plan, child, state = trial.plan, trial.child, self.state
        if isinstance(val, RejectReason):
            trial.reason = val
            await self.announcer.rejected(trial, parent_idx)
        elif state.contains(child):
            trial.reason = RejectReason.DUPLICATE
            await self.announcer.rejected(trial, parent_idx)
        else:
            led = self.pool.best_score()
            trial.candidate_idx = self.pool.add(child, (parent_idx,), val)
            state.merges_due += 1
            self.tuning.admitted += 1
            self.tuning.leads += aggregate(state.val_scores[trial.candidate_idx]) > led
            await self.announcer.accepted(
                trial, parent_idx, aggregate(state.val_scores[trial.candidate_idx])
            )
            await self.announcer.frontier(state.val_scores, self.pool.front(), plan.iteration)
