"""The candidate pool as the run's parts read and grow it: the views parents and merges
are drawn from (the Pareto frontier's keys, its front, the best score) and admission.

Admission is one path for the seed, mutations and merges alike, so a valset batch is
always checked against the run's objectives before it joins (`inputs.check_objectives`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gepa_opt.config import GEPAConfig
from gepa_opt.inputs import check_objectives
from gepa_opt.merge import MergePlan
from gepa_opt.pareto import FrontierKey, aggregate, best_index, frontier_scores, win_counts
from gepa_opt.round_robin import RoundRobin
from gepa_opt.state import GEPAState
from gepa_opt.types import Candidate, EvaluationBatch, ExampleId


@dataclass(frozen=True)
class Pool:
    state: GEPAState
    config: GEPAConfig
    val_ids: list[ExampleId]
    round_robin: RoundRobin

    def frontier_scores(self) -> list[dict[FrontierKey, float]]:
        """Per candidate, its scores on the keys of the GEPAConfig.frontier in use."""
        state = self.state
        return frontier_scores(state.val_scores, state.val_objective_scores, self.config.frontier)

    def front(self, frontier: list[dict[FrontierKey, float]] | None = None) -> list[int]:
        """The candidates that stay parents (`GEPAConfig.parent_pruning`)."""
        scores = self.frontier_scores() if frontier is None else frontier
        return list(win_counts(scores, self.config.parent_pruning))

    def best_score(self) -> float:
        scores = self.state.val_scores
        return aggregate(scores[best_index(scores)])

    def add(self, candidate: Candidate, parents: tuple[int, ...], val: EvaluationBatch) -> int:
        """Line 14's admission, with the round-robin position its first groups reached."""
        index = self.state.add(candidate, parents, *self._val_results(val))
        self.state.component_cursor[index] = self.round_robin.take(candidate)
        return index

    def add_merge(self, plan: MergePlan, val: EvaluationBatch) -> int:
        """A merge goes on from the further of its parents' round robins, as upstream gepa."""
        state = self.state
        index = state.add(plan.candidate, (plan.i, plan.j), *self._val_results(val))
        cursors = state.component_cursor
        cursors[index] = max(cursors[plan.i], cursors[plan.j])
        return index

    def _val_results(
        self, batch: EvaluationBatch
    ) -> tuple[dict[ExampleId, float], dict[ExampleId, dict[str, float]]]:
        """A full valset batch as (per-instance scores, per-instance objective scores)."""
        ids = self.val_ids
        scores = dict(zip(ids, batch.scores, strict=True))
        objectives: dict[ExampleId, dict[str, float]] = {}
        if batch.objective_scores is not None:
            objectives = {i: dict(o) for i, o in zip(ids, batch.objective_scores, strict=True) if o}
        if self.config.frontier != "instances":
            pool = self.state.val_objective_scores
            known = set(next(iter(pool[0].values()), {})) if pool else None
            check_objectives(ids, objectives, known, self.config.frontier)
        return scores, objectives
