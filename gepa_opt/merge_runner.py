"""Merges as the run launches them beside its mutations (`GEPAConfig.use_merge`).

`merge.py` decides what a merge is and whether its subsample accepts it, purely; this
owns what it leaves to the caller: when one is due, its budget, the evaluations of the
merged candidate (subsample, then the whole valset) and its admission.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from gepa_opt.announcer import Announcer
from gepa_opt.budget import Budget, Reservation
from gepa_opt.cache import Split
from gepa_opt.config import GEPAConfig
from gepa_opt.evaluator import Example
from gepa_opt.events import MergeTried
from gepa_opt.merge import MergePlan, find_merge, merge_accepted, merge_subsample
from gepa_opt.metric_calls import MetricCalls
from gepa_opt.pool import Pool
from gepa_opt.state import GEPAState
from gepa_opt.types import CallFailed, DataInst, ExampleId


@dataclass(frozen=True)
class MergeLaunch:
    """A merge numbered and paid for, ready to run."""

    iteration: int
    plan: MergePlan
    subsample: list[ExampleId]
    reservation: Reservation


@dataclass(frozen=True)
class MergeRunner:
    state: GEPAState
    config: GEPAConfig
    budget: Budget
    pool: Pool
    calls: MetricCalls
    announcer: Announcer
    valset: Sequence[Example]
    rng: random.Random

    @cached_property
    def _val_by_id(self) -> dict[ExampleId, DataInst]:
        return dict(self.valset)

    def plan(self) -> MergeLaunch | None:
        """A merge to launch now: one is due after each accepted proposal (upstream's
        rule), while invocations remain and a whole valset pass still fits."""
        state, config = self.state, self.config
        if not (
            config.use_merge
            and state.merges_due > 0
            and len(state.merges_tried) < config.max_merge_invocations
            and self.budget.fits(len(self.valset))
        ):
            return None
        state.merges_due -= 1
        tried = set(state.merges_tried)
        plan = find_merge(
            state.candidates, state.parents, state.val_scores, self.rng, tried, self.pool.front()
        )
        if plan is None:
            return None
        state.merges_tried.append(plan.key)
        ids = merge_subsample(
            state.val_scores[plan.i],
            state.val_scores[plan.j],
            config.merge_subsample_size,
            self.rng,
        )
        state.iteration += 1
        # the subsample is part of the valset: its scores count toward the full pass
        return MergeLaunch(state.iteration, plan, ids, self.budget.reserve(len(self.valset)))

    async def run(self, launch: MergeLaunch) -> MergeTried:
        """Score the merge on its subsample; if it holds up there, on the whole valset,
        and admit it."""
        state, plan, ids = self.state, launch.plan, launch.subsample
        iteration, reservation = launch.iteration, launch.reservation
        try:
            subsample = [(k, self._val_by_id[k]) for k in ids]
            try:
                batch = await self.calls.evaluate(
                    plan.candidate, Split.VAL, subsample, reservation, iteration
                )
                merged = dict(zip(ids, batch.scores, strict=True))
            except CallFailed:  # no subsample scores: not accepted, its parents stay
                merged = {}
            i_scores, j_scores = state.val_scores[plan.i], state.val_scores[plan.j]
            parents_best = max(sum(i_scores[k] for k in ids), sum(j_scores[k] for k in ids))
            candidate_idx = None
            accepted = bool(merged) and merge_accepted(merged, i_scores, j_scores)
            if accepted and not state.contains(plan.candidate):
                try:
                    val = await self.calls.evaluate(
                        plan.candidate, Split.VAL, self.valset, reservation, iteration
                    )
                except CallFailed:
                    val = None
                if val is not None and not state.contains(plan.candidate):
                    candidate_idx = self.pool.add_merge(plan, val)
            event = MergeTried(
                iteration=iteration,
                i=plan.i,
                j=plan.j,
                ancestor=plan.ancestor,
                subsample_score=sum(merged.values()),
                parents_best_subsample_score=parents_best,
                candidate_idx=candidate_idx,
            )
            await self.announcer.emit(event)
            if candidate_idx is not None:
                await self.announcer.frontier(state.val_scores, self.pool.front(), iteration)
            return event
        finally:
            reservation.release()
